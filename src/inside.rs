//! Which server's code the current thread is running, so that stop, wait and free can
//! tell when they are called from a callback of the very server they act on (a handler,
//! a log line, a release callback, a thread hook) and must not block on it.

use std::cell::Cell;

thread_local! {
    /// The server whose engine thread (I/O worker or pool thread) this is, for its life.
    static ENGINE_OF: Cell<u64> = const { Cell::new(0) };
    /// The server whose callback this thread runs right now (0 = none).
    static CURRENT: Cell<u64> = const { Cell::new(0) };
    /// An I/O worker of an inline-dispatch server: it must never block (it drives every
    /// connection it holds).
    static IO_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// `strict`: blocking waits are refused here (inline dispatch).
pub(crate) fn mark_io_thread(strict: bool) {
    IO_THREAD.with(|c| c.set(strict));
}

/// Runs `f` with blocking waits refused on this thread (an auto-dispatch handler running
/// on the I/O thread of its own connection).
pub(crate) fn strict_io<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            IO_THREAD.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(IO_THREAD.with(|c| c.replace(true)));
    f()
}

pub(crate) fn on_io_thread() -> bool {
    IO_THREAD.with(|c| c.get())
}

/// Marks this thread as one of `server_id`'s engine threads until it exits.
pub(crate) fn mark_engine_thread(server_id: u64) {
    ENGINE_OF.with(|c| c.set(server_id));
}

/// True when blocking on `server_id` from here could wait for this very thread.
pub(crate) fn inside(server_id: u64) -> bool {
    server_id != 0 && (ENGINE_OF.with(|c| c.get()) == server_id || CURRENT.with(|c| c.get()) == server_id)
}

/// Runs `f` marked as running `server_id`'s code.
pub(crate) fn within<T>(server_id: u64, f: impl FnOnce() -> T) -> T {
    struct Restore(u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.replace(server_id)));
    f()
}
