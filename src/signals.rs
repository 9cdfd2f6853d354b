//! A write to a socket the peer closed raises SIGPIPE, which kills a process that left it
//! at the default action. Rust programs ignore it at startup, but a C, Python or .NET host
//! that loads this library may not; a departing client must never kill the host.

/// Ignores SIGPIPE unless the host already chose its own disposition (then it is theirs).
#[cfg(unix)]
pub(crate) fn ignore_sigpipe_if_default() {
    // SAFETY: plain sigaction calls with zeroed, fully initialised structs.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL {
            return;
        }
        let mut ignore: libc::sigaction = std::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        libc::sigemptyset(&mut ignore.sa_mask);
        libc::sigaction(libc::SIGPIPE, &ignore, std::ptr::null_mut());
    }
}

#[cfg(not(unix))]
pub(crate) fn ignore_sigpipe_if_default() {}
