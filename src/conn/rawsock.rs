//! A second handle on a connection's socket, taken while hyper still owns the first,
//! so that the engine can say its last word (a 408) after hyper is gone. Nothing is
//! ever written to a socket hyper is still writing to.

use std::io::{self, Read};
use std::time::Duration;
use tokio::io::AsyncReadExt;

const TIMEOUT_408: &[u8] = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

#[cfg(unix)]
pub(crate) type Raw = std::os::fd::RawFd;
#[cfg(windows)]
pub(crate) type Raw = std::os::windows::io::RawSocket;

pub(crate) fn raw_of(stream: &tokio::net::TcpStream) -> Raw {
    #[cfg(unix)]
    return std::os::fd::AsRawFd::as_raw_fd(stream);
    #[cfg(windows)]
    return std::os::windows::io::AsRawSocket::as_raw_socket(stream);
}

/// Bytes written to the socket that the peer has not acknowledged yet (Linux SIOCOUTQ);
/// None where the system cannot tell.
#[cfg(target_os = "linux")]
pub(crate) fn unsent(raw: Raw) -> Option<u32> {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one int; the fd belongs to a live connection.
    let rc = unsafe { libc::ioctl(raw, libc::TIOCOUTQ, &mut n) };
    (rc == 0).then_some(n as u32)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn unsent(_raw: Raw) -> Option<u32> {
    None
}

/// Bytes that arrived on the socket and were not read yet (FIONREAD); None where the
/// system cannot tell.
#[cfg(unix)]
pub(crate) fn unread(raw: Raw) -> Option<u32> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int; the fd belongs to a live connection.
    let rc = unsafe { libc::ioctl(raw, libc::FIONREAD, &mut n) };
    (rc == 0).then_some(n as u32)
}

#[cfg(not(unix))]
pub(crate) fn unread(_raw: Raw) -> Option<u32> {
    None
}

/// Duplicates the socket. The caller guarantees the stream owning `raw` is alive.
pub(crate) fn duplicate(raw: Raw) -> io::Result<socket2::Socket> {
    #[cfg(unix)]
    {
        // SAFETY: the stream owning this fd is alive for the duration of the call.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(raw) };
        socket2::SockRef::from(&fd).try_clone()
    }
    #[cfg(windows)]
    {
        // SAFETY: the stream owning this socket is alive for the duration of the call.
        let s = unsafe { std::os::windows::io::BorrowedSocket::borrow_raw(raw) };
        socket2::SockRef::from(&s).try_clone()
    }
}

/// Sends the 408 and closes. Input still arriving is read and dropped for a moment
/// first and after: closing over unread bytes sends a reset that can destroy the answer
/// before the client reads it.
pub(crate) async fn send_408(sock: socket2::Socket) {
    // On the heap: held across the await below, an array would be part of every
    // connection's task, the whole life of the connection.
    let mut scratch = vec![0u8; 4096];
    let _ = sock.set_nonblocking(true);
    for _ in 0..16 {
        match (&sock).read(&mut scratch) {
            Ok(n) if n > 0 => continue,
            _ => break,
        }
    }
    if sock.send(TIMEOUT_408).is_err() {
        return;
    }
    let _ = sock.shutdown(std::net::Shutdown::Write);
    let Ok(mut stream) = tokio::net::TcpStream::from_std(std::net::TcpStream::from(sock)) else { return };
    let _ = tokio::time::timeout(Duration::from_millis(500), async {
        while matches!(stream.read(&mut scratch).await, Ok(n) if n > 0) {}
    })
    .await;
}
