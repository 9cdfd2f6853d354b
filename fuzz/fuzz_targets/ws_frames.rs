//! WebSocket frames into the engine after a real upgrade, through a loopback connection.
//!
//! One server for the process (inline dispatch): `/ws` echoes every message. Each input is
//! a first byte choosing how the rest is sent, then the bytes:
//! - even: as they are (raw frames: unmasked ones, reserved bits and opcodes, bad lengths);
//! - odd: cut into frames the engine must parse (see `frames`): each piece becomes one
//!   masked frame whose opcode, FIN bit and payload come from the input, so fragments,
//!   control frames inside messages, bad UTF-8 and close codes are reached without the
//!   fuzzer first having to learn masking.
//!
//! What comes back must be well-formed server frames (unmasked, valid opcodes, control
//! frames at most 125 bytes), ending, if the engine closes, with a close frame whose code
//! is one a server may send. After every input a fresh connection still gets its echo.
#![no_main]

use ember::ws::{self, WsRoute};
use ember::{Dispatch, Request, Server};
use libfuzzer_sys::fuzz_target;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const HANDSHAKE: &[u8] = b"GET /ws HTTP/1.1\r\nHost: fuzz\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

static SERVER: OnceLock<(Arc<Server>, u16)> = OnceLock::new();

/// What the server counted, for a failure's message: whether the connection was accepted
/// and whether a request started on it tell where a missing answer got lost.
fn server_stats() -> String {
    SERVER.get().map_or_else(String::new, |(s, _)| format!("{:?}", s.stats()))
}

fn server_port() -> u16 {
    SERVER.get_or_init(|| {
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let s = Arc::new(Server::new());
        s.listen("127.0.0.1:0").unwrap();
        s.set_dispatch(Dispatch::Inline).unwrap();
        s.set_workers(1).unwrap();
        s.set_limits(|l| {
            l.ws_max_message_bytes = 64 * 1024;
            l.idle_timeout = Duration::from_millis(500);
            Ok(())
        })
        .unwrap();
        let route = WsRoute::new(
            Arc::new(|id, _r: &Request| drop(ws::accept(id, b""))),
            Arc::new(|id, kind, data: &[u8]| drop(ws::send(id, kind, data))),
            Arc::new(|_, _, _: &str| {}),
            None,
        );
        s.websocket("/ws", Arc::new(route)).unwrap();
        s.start().unwrap();
        let port = s.port(0).unwrap();
        (s, port)
    })
    .1
}

fn connect(port: u16) -> TcpStream {
    let c = TcpStream::connect(("127.0.0.1", port)).expect("the fuzzed server accepts connections");
    // Reset on close: thousands of connections a minute must not pile up in TIME_WAIT.
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    unsafe {
        libc::setsockopt(
            c.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    c.set_nodelay(true).unwrap();
    c
}

/// How long a liveness check waits for its first byte. Long runs go at nice 19 beside
/// other work: a 5 s wait mistook the starved process's delay for an unanswered handshake.
const LIVENESS: Duration = Duration::from_secs(30);

fn silence(closed: bool) -> String {
    let how = if closed { "the server closed the connection" } else { "nothing within the wait" };
    format!("{how}; last read error: {:?}; server: {}", LAST_ERROR.with(|e| e.take()), server_stats())
}

thread_local! {
    /// The error that ended the last read (a reset tells the kernel's doing from a close).
    static LAST_ERROR: std::cell::Cell<Option<std::io::ErrorKind>> = const { std::cell::Cell::new(None) };
}

/// Upgrades `c` and returns what followed the 101 head (nothing, normally).
fn upgrade(c: &mut TcpStream) -> Vec<u8> {
    c.write_all(HANDSHAKE).expect("handshake written");
    let (head, closed) = read_for(c, LIVENESS, Duration::from_millis(1), |b| find(b, b"\r\n\r\n").is_some());
    assert!(head.starts_with(b"HTTP/1.1 101"), "no 101 ({}): {:?}", silence(closed), String::from_utf8_lossy(&head));
    let end = find(&head, b"\r\n\r\n").unwrap() + 4;
    head[end..].to_vec()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads until `done(bytes)`, the close, `quiet` without data after some came, or `cap`.
fn read_for(c: &mut TcpStream, cap: Duration, quiet: Duration, done: impl Fn(&[u8]) -> bool) -> (Vec<u8>, bool) {
    let start = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        if done(&out) {
            return (out, false);
        }
        let left = cap.saturating_sub(start.elapsed());
        if left.is_zero() {
            return (out, false);
        }
        let wait = if out.is_empty() { left } else { quiet.min(left) };
        c.set_read_timeout(Some(wait.max(Duration::from_millis(1)))).unwrap();
        match c.read(&mut buf) {
            Ok(0) => {
                LAST_ERROR.with(|l| l.set(None));
                return (out, true);
            }
            Ok(n) => out.extend_from_slice(&buf[..n]),
            // libFuzzer's -timeout watchdog is a SIGALRM every few seconds: a read it
            // interrupts is retried, not taken for the server closing (it was, 4 times).
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return (out, false),
            Err(e) => {
                LAST_ERROR.with(|l| l.set(Some(e.kind())));
                return (out, true);
            }
        }
    }
}

/// One masked client frame.
fn frame(fin: bool, opcode: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.push(((fin as u8) << 7) | (opcode & 0x0f));
    let len = payload.len();
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if len <= 0xffff {
        out.push(0x80 | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    let mask = [0x12, 0x34, 0x56, 0x78];
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
}

/// Structured mode: pieces of `[control byte][len byte][payload]`; the control byte's low
/// nibble is the opcode, bit 7 the FIN bit.
fn frames(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while data.len() >= 2 {
        let (ctl, len) = (data[0], data[1] as usize);
        let take = len.min(data.len() - 2);
        frame(ctl & 0x80 != 0, ctl & 0x0f, &data[2..2 + take], &mut out);
        data = &data[2 + take..];
    }
    out
}

/// Checks the server's frames; returns the close code if it sent a close frame.
fn check_server_frames(input: &[u8], mut out: &[u8]) -> Option<u16> {
    while out.len() >= 2 {
        let (b0, b1) = (out[0], out[1]);
        assert_eq!(b0 & 0x70, 0, "reserved bits set by the server after {input:?}: {out:?}");
        assert_eq!(b1 & 0x80, 0, "a masked server frame after {input:?}");
        let opcode = b0 & 0x0f;
        assert!(matches!(opcode, 0 | 1 | 2 | 8 | 9 | 10), "opcode {opcode} from the server after {input:?}");
        let (len, head) = match b1 & 0x7f {
            126 if out.len() >= 4 => (u16::from_be_bytes([out[2], out[3]]) as usize, 4),
            127 if out.len() >= 10 => (u64::from_be_bytes(out[2..10].try_into().unwrap()) as usize, 10),
            126 | 127 => return None, // cut by our read
            n => (n as usize, 2),
        };
        if opcode >= 8 {
            assert!(len <= 125 && b0 & 0x80 != 0, "bad control frame from the server after {input:?}");
        }
        if out.len() < head + len {
            return None;
        }
        if opcode == 8 {
            let payload = &out[head..head + len];
            assert_ne!(len, 1, "a one-byte close payload from the server after {input:?}");
            if len >= 2 {
                let code = u16::from_be_bytes([payload[0], payload[1]]);
                let sendable = matches!(code, 1000..=1003 | 1007..=1011 | 3000..=4999);
                assert!(sendable, "close code {code} from the server after {input:?}");
                assert!(std::str::from_utf8(&payload[2..]).is_ok(), "a close reason that is not UTF-8 after {input:?}");
                return Some(code);
            }
            return Some(1005);
        }
        out = &out[head + len..];
    }
    None
}

fn still_echoing(port: u16, input: &[u8]) {
    let mut c = connect(port);
    let rest = upgrade(&mut c);
    assert!(rest.is_empty(), "bytes after the 101: {rest:?}");
    let mut hello = Vec::new();
    frame(true, 1, b"hello", &mut hello);
    c.write_all(&hello).unwrap();
    let (out, closed) = read_for(&mut c, LIVENESS, Duration::from_millis(1), |b| b.len() >= 7);
    assert_eq!(&out[..], &[0x81, 5, b'h', b'e', b'l', b'l', b'o'][..], "after {input:?} the echo is {out:?} ({})", silence(closed));
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, data)) = input.split_first() else { return };
    let port = server_port();
    let mut c = connect(port);
    let mut out = upgrade(&mut c);
    let bytes = if mode & 1 == 0 { data.to_vec() } else { frames(data) };
    let _ = c.write_all(&bytes);
    let (more, _) = read_for(&mut c, Duration::from_millis(100), Duration::from_millis(10), |_| false);
    out.extend_from_slice(&more);
    check_server_frames(input, &out);
    drop(c);
    still_echoing(port, input);
});
