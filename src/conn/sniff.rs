//! Waits for a new connection's first request head, without consuming it, before hyper
//! gets the connection; tells HTTP/2 prior knowledge from HTTP/1 by the same bytes.
//!
//! hyper gives every connection an 8 KiB write buffer when it is made and a read buffer
//! that grows to 16 KiB at the second partial read of a head. A client that trickles its
//! head (slowloris) held about 30 KiB until the header timeout cut it: 5,000 of them
//! took 270 MB (bench/hostile.py, 2026-12-07). Waiting here costs one small buffer, freed
//! before hyper starts.

use crate::connstate::ConnState;
use std::io;
use std::time::Duration;
use tokio::io::Interest;
use tokio::net::TcpStream;

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Most request heads fit (curl and most API clients send 0.1-0.5 KiB, browsers up to
/// 1.5 KiB and more with cookies); a longer one is not held back: it goes to hyper as
/// soon as this much of it is there, as every head did before.
const PEEK_MAX: usize = 1024;

/// Waits until the first bytes decide. Some(true) = HTTP/2, Some(false) = HTTP/1 (its head
/// complete, or longer than `PEEK_MAX`, or its client done sending), None = closed before a
/// byte. The watchdog bounds the wait (the header timeout applies).
pub(crate) async fn is_h2(stream: &TcpStream, state: &ConnState) -> io::Result<Option<bool>> {
    let mut buf = vec![0u8; PEEK_MAX];
    let mut seen = 0;
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        let grew = n > seen;
        if grew {
            state.on_read(n - seen);
            seen = n;
        }
        let got = &buf[..n];
        let first = n.min(H2_PREFACE.len());
        if got[..first] == H2_PREFACE[..first] {
            if n >= H2_PREFACE.len() {
                return Ok(Some(true));
            }
            if !grew {
                // A part of the preface and no more bytes: a peer that half-closed keeps
                // the socket readable, so waiting on readiness would spin.
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        } else if !grew || n == PEEK_MAX || head_ends(got) {
            // Woken without new bytes: the peer may have half-closed (that readiness never
            // clears), so hyper takes it from here, as it would have at once before.
            return Ok(Some(false));
        }
        // Nothing consumed, so the socket stays readable: clear the readiness seen so far,
        // so that the next peek waits for bytes that arrive after this one. A wake-up that
        // came in between is not lost: tokio clears only if no newer event arrived.
        let _ = stream.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
    }
}

/// Whether a request head's end (an empty line; bare LF line ends count, as httparse
/// accepts them) is in `b`.
fn head_ends(b: &[u8]) -> bool {
    b.windows(2).any(|w| w == b"\n\n") || b.windows(3).any(|w| w == b"\n\r\n")
}

#[cfg(test)]
mod tests {
    use super::head_ends;

    #[test]
    fn head_end_is_found_with_crlf_or_bare_lf() {
        assert!(head_ends(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
        assert!(head_ends(b"GET / HTTP/1.1\nHost: a\n\n"));
        assert!(head_ends(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nbody"));
        assert!(!head_ends(b"GET / HTTP/1.1\r\nHost: a\r\n"));
        assert!(!head_ends(b"GET / HTTP/1.1\r\nHost: a\r\n\r"));
        assert!(!head_ends(b"GET / HTTP/1.1"));
    }
}
