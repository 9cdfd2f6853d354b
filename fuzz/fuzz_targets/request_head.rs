//! Raw bytes into the engine through a real loopback connection.
//!
//! One ember server runs for the whole process (inline dispatch, short timeouts). Each
//! input is written to a fresh connection as it is; whatever comes back must be a
//! well-formed HTTP/1.x answer (or HTTP/2 frames for an input that starts with the
//! preface), or nothing and a close. The engine must never answer 500 (no route here
//! fails), and after every input a plain request on a new connection is still answered.
//!
//! Until the connection driver is generic over its IO type (issue 13), this is the way in;
//! it is slower than an in-memory pipe, and the server threads' coverage counts too.
#![no_main]

use ember::{Dispatch, Request, Server};
use libfuzzer_sys::fuzz_target;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn server_port() -> u16 {
    static PORT: OnceLock<(Arc<Server>, u16)> = OnceLock::new();
    PORT.get_or_init(|| {
        // The harness writes to sockets the server may already have closed.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let s = Arc::new(Server::new());
        s.listen("127.0.0.1:0").unwrap();
        s.set_dispatch(Dispatch::Inline).unwrap();
        s.set_workers(1).unwrap();
        s.set_limits(|l| {
            l.header_timeout = Duration::from_millis(200);
            l.idle_timeout = Duration::from_millis(500);
            l.handler_timeout = Duration::from_millis(500);
            l.max_body_bytes = 64 * 1024;
            Ok(())
        })
        .unwrap();
        let ok = |body: &'static str| Arc::new(move |r: &Request| drop(r.respond(200, b"Content-Type: text/plain", body)));
        s.route(Some(http::Method::GET), "/", ok("hello")).unwrap();
        s.route(Some(http::Method::GET), "/users/{id}", Arc::new(|r: &Request| {
            let id = r.data().param("id").unwrap_or("").to_owned();
            drop(r.respond(200, b"", id));
        }))
        .unwrap();
        s.route(Some(http::Method::POST), "/echo", Arc::new(|r: &Request| {
            let ct = r.data().header("content-type").map(|v| [b"Content-Type: ", v].concat()).unwrap_or_default();
            // A type that is no valid response header value is refused; then answer without it.
            if r.respond(200, &ct, r.data().body().clone()).is_err() {
                drop(r.respond(200, b"", r.data().body().clone()));
            }
        }))
        .unwrap();
        s.route(None, "/files/{*rest}", ok("file")).unwrap();
        // Answered from another thread: the deferred path.
        s.route(Some(http::Method::GET), "/later", Arc::new(|r: &Request| {
            let r = r.clone();
            std::thread::spawn(move || drop(r.respond(202, b"X-Later: 1", "later")));
        }))
        .unwrap();
        // Never answered: the handler timeout answers 503.
        s.route(Some(http::Method::GET), "/never", Arc::new(|_: &Request| {})).unwrap();
        s.start().unwrap();
        let port = s.port(0).unwrap();
        (s, port)
    })
    .1
}

fn connect(port: u16) -> TcpStream {
    let c = TcpStream::connect(("127.0.0.1", port)).expect("the fuzzed server accepts connections");
    // Close with a reset: thousands of connections per minute must not pile up in TIME_WAIT.
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
    c
}

/// Reads what the server sends: waits `first` for the first byte, then until the server
/// closes, goes quiet for `quiet`, or `cap` passes. Returns (bytes, closed).
fn read_answer(c: &mut TcpStream, first: Duration, quiet: Duration, cap: Duration) -> (Vec<u8>, bool) {
    let start = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let wait = if out.is_empty() { first } else { quiet };
        let left = cap.saturating_sub(start.elapsed());
        if left.is_zero() {
            return (out, false);
        }
        c.set_read_timeout(Some(wait.min(left).max(Duration::from_millis(1)))).unwrap();
        match c.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            // libFuzzer's -timeout watchdog is a SIGALRM every few seconds: a read it
            // interrupts is retried, not taken for the server closing (it was, 4 times).
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return (out, false),
            // A reset after an answer (the server closed with unread input) is a close.
            Err(_) => return (out, true),
        }
    }
}

/// Checks the first answer in `out` and returns its status.
fn check_http1(input: &[u8], out: &[u8]) -> Option<u16> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(out) {
        Ok(httparse::Status::Complete(_)) => {}
        // Cut off by our read timeout: the part that came must still look like an answer.
        Ok(httparse::Status::Partial) => {
            assert!(out.starts_with(&b"HTTP/1.1 "[..out.len().min(9)]) || out.starts_with(&b"HTTP/1.0 "[..out.len().min(9)]),
                "answer to {input:?} does not start like HTTP/1.x: {out:?}");
            return None;
        }
        Err(e) => panic!("answer to {input:?} is not HTTP/1.x ({e}): {:?}", String::from_utf8_lossy(out)),
    }
    let code = resp.code.expect("parsed answers have a status");
    assert!((100..=599).contains(&code), "status {code} to {input:?}");
    assert_ne!(code, 500, "the engine answered 500 to {input:?}: {:?}", String::from_utf8_lossy(out));
    Some(code)
}

fn still_serving(port: u16, input: &[u8]) {
    let mut c = connect(port);
    c.write_all(b"GET / HTTP/1.1\r\nHost: fuzz\r\n\r\n").expect("health request written");
    // 30 s: long runs go at nice 19 beside other work, and a starved process is slow, not
    // hung; a closed connection or silence past that is a finding.
    let (out, closed) = read_answer(&mut c, Duration::from_secs(30), Duration::from_millis(2), Duration::from_secs(30));
    let how = if closed { "closed" } else { "silent" };
    assert!(out.starts_with(b"HTTP/1.1 200"), "after {input:?} a plain GET got {:?} ({how})", String::from_utf8_lossy(&out));
    assert!(out.ends_with(b"hello"), "after {input:?} a plain GET got {:?}", String::from_utf8_lossy(&out));
}

fuzz_target!(|input: &[u8]| {
    let port = server_port();
    let mut c = connect(port);
    // The server may close before reading everything (a 400 on the first line): fine.
    let _ = c.write_all(input);
    let (out, _closed) = read_answer(&mut c, Duration::from_millis(20), Duration::from_millis(5), Duration::from_millis(600));
    if !out.is_empty() {
        if input.starts_with(H2_PREFACE) {
            // HTTP/2 frames: a 9-byte frame header, the first one SETTINGS (type 4).
            assert!(out.len() < 9 || out[3] == 4, "HTTP/2 answer to {input:?} does not start with SETTINGS: {out:?}");
        } else if out.starts_with(b"HTTP/1.1 408") {
            // The header timeout (a partial HTTP/2 preface or head that stalled).
        } else {
            check_http1(input, &out);
        }
    }
    let _ = c.shutdown(Shutdown::Both);
    drop(c);
    still_serving(port, input);
});
