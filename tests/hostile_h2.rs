//! Regression tests for the weaknesses the hostile-client suite (tests/hostile, issue 12
//! item 3) found, each through a real socket.

mod common;
use common::*;
use ember::streaming;
use ember::{Dispatch, Request};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len();
    let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK: `:method GET` (static 2), `:scheme http` (6), `:path` literal, `:authority t`.
fn get_block(path: &str) -> Vec<u8> {
    let mut b = vec![0x82, 0x86, 0x04, path.len() as u8];
    b.extend_from_slice(path.as_bytes());
    b.extend_from_slice(&[0x01, 0x01, b't']);
    b
}

/// An HTTP/2 client that grants every stream a window of `window` bytes and never more,
/// asks for `path` on `streams` streams, and then only sends PINGs, every 100 ms. Returns
/// how long the server kept the connection open (None: still open after `limit`).
fn starve(port: u16, window: u32, path: &str, streams: u32, limit: Duration) -> Option<Duration> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    let mut setting = vec![0, 4];
    setting.extend_from_slice(&window.to_be_bytes());
    hello.extend(h2_frame(4, 0, 0, &setting));
    for i in 0..streams {
        hello.extend(h2_frame(1, 0x5, 1 + 2 * i, &get_block(path)));
    }
    c.write_all(&hello).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let t = Instant::now();
    let mut buf = vec![0u8; 1 << 16];
    let mut next_ping = t;
    while t.elapsed() < limit {
        match c.read(&mut buf) {
            Ok(0) => return Some(t.elapsed()),
            Err(e) if !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return Some(t.elapsed()),
            _ => {}
        }
        // By the clock, not per answer: a PING for every PONG would be a flood of its own.
        if Instant::now() >= next_ping {
            next_ping += Duration::from_millis(100);
            if c.write_all(&h2_frame(6, 0, 0, b"ping-me!")).is_err() {
                return Some(t.elapsed());
            }
        }
    }
    None
}

fn big_answers(idle_ms: u64) -> (Arc<ember::Server>, u16) {
    server(Dispatch::Inline, |s| {
        s.set_limits(|l| Ok(l.idle_timeout = Duration::from_millis(idle_ms))).unwrap();
        let body = bytes::Bytes::from(vec![b'x'; 256 << 10]);
        s.route(Some(http::Method::GET), "/big", Arc::new(move |r: &Request| {
            r.respond(200, b"", body.clone()).unwrap();
        }))
        .unwrap();
        let huge = bytes::Bytes::from(vec![b'h'; 32 << 20]);
        s.route(Some(http::Method::GET), "/huge", Arc::new(move |r: &Request| {
            r.respond(200, b"", huge.clone()).unwrap();
        }))
        .unwrap();
        s.route(Some(http::Method::GET), "/stream", Arc::new(|r: &Request| {
            let id = r.id();
            streaming::begin(id, 200, b"").unwrap();
            std::thread::spawn(move || {
                // Until the client is gone: a full queue only means "later".
                loop {
                    match streaming::write(id, bytes::Bytes::from(vec![b's'; 64 << 10])) {
                        Err(e) if e.kind != ember::ErrorKind::WouldBlock => break,
                        _ => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            });
        }))
        .unwrap();
    })
}

#[test]
fn an_http2_peer_that_never_opens_its_window_is_cut_after_the_idle_timeout() {
    let (_s, port) = big_answers(500);
    for path in ["/big", "/stream"] {
        let took = starve(port, 0, path, 20, Duration::from_secs(6));
        let took = took.unwrap_or_else(|| panic!("{path}: a peer with a closed window (sending PINGs) was held for 6 s"));
        assert!(took >= Duration::from_millis(400), "{path}: cut after {took:?}, before the idle timeout");
    }
}

#[test]
fn an_http2_peer_that_lets_one_byte_through_and_then_starves_is_cut_too() {
    // With a window of one byte the whole answer is handed to the HTTP/2 layer at once, so
    // no answer body waits any more; the open stream still does.
    let (_s, port) = big_answers(500);
    let took = starve(port, 1, "/big", 20, Duration::from_secs(6));
    assert!(took.is_some(), "a peer with a one-byte window (sending PINGs) was held for 6 s");
}

#[test]
fn an_idle_streamed_http2_answer_is_not_cut_by_the_idle_timeout() {
    // An event stream that is quiet for longer than the idle timeout waits for its host,
    // not for the peer: it must live on.
    let (_s, port) = server(Dispatch::Pool, |s| {
        s.set_limits(|l| Ok(l.idle_timeout = Duration::from_millis(300))).unwrap();
        s.route(Some(http::Method::GET), "/quiet", Arc::new(|r: &Request| {
            let id = r.id();
            streaming::begin(id, 200, b"Content-Type: text/event-stream").unwrap();
            std::thread::spawn(move || {
                for i in 0..3 {
                    streaming::write(id, format!("data: {i}\n\n").into()).unwrap();
                    std::thread::sleep(Duration::from_millis(900));
                }
                streaming::end(id).unwrap();
            });
        }))
        .unwrap();
    });
    let body = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
        let client = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
        let r = client.get(format!("http://127.0.0.1:{port}/quiet")).send().await.unwrap();
        assert_eq!(r.version(), http::Version::HTTP_2);
        r.text().await.unwrap()
    });
    assert_eq!(body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
}

#[test]
fn a_large_http2_answer_to_a_steady_reader_is_not_cut() {
    let (_s, port) = big_answers(300);
    let n = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
        let client = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
        let mut total = 0;
        let futs: Vec<_> = (0..8).map(|_| client.get(format!("http://127.0.0.1:{port}/big")).send()).collect();
        for f in futs {
            let r = f.await.unwrap();
            total += r.bytes().await.unwrap().len();
        }
        // One long download: thousands of WINDOW_UPDATEs from the client, none a flood.
        let r = client.get(format!("http://127.0.0.1:{port}/huge")).send().await.unwrap();
        total + r.bytes().await.unwrap().len()
    });
    assert_eq!(n, 8 * (256 << 10) + (32 << 20));
}

/// Sends `frame` `per_batch` times every `pause` for up to `limit`, reading what comes
/// back; how long until the server closed the connection (None: still open).
fn flood(port: u16, frame: &[u8], per_batch: usize, pause: Duration, limit: Duration) -> Option<Duration> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(h2_frame(4, 0, 0, &[]));
    c.write_all(&hello).unwrap();
    c.set_nonblocking(true).unwrap();
    let batch = frame.repeat(per_batch);
    let t = Instant::now();
    let mut buf = vec![0u8; 1 << 16];
    while t.elapsed() < limit {
        match c.read(&mut buf) {
            Ok(0) => return Some(t.elapsed()),
            Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => return Some(t.elapsed()),
            _ => {}
        }
        let mut left = &batch[..];
        while !left.is_empty() {
            match c.write(left) {
                Ok(n) => left = &left[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
                Err(_) => return Some(t.elapsed()),
            }
        }
        std::thread::sleep(pause);
    }
    None
}

#[test]
fn an_http2_ping_or_settings_flood_is_cut_while_a_pinging_client_is_not() {
    if std::env::var_os("EMBER_TSAN").is_some() {
        // The flood is cut once the frames the server *reads* outrun the bucket's drain
        // (100 a second). A debug build under ThreadSanitizer, beside the 32 MiB download
        // above, once read fewer than that for 90 s (h2 answers each PING before it
        // decodes the next), so the bound says nothing about the engine there. The release
        // run of this test (the plain `cargo test` stage) is the one that counts;
        // TSan's job here is the other tests' races.
        eprintln!("SKIP under TSan: the flood is not fast enough to measure the cut");
        return;
    }
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.set_limits(|l| Ok(l.idle_timeout = Duration::from_secs(30))).unwrap();
    });
    let ping = h2_frame(6, 0, 0, b"flooding");
    let settings = h2_frame(4, 0, 0, &[0, 3, 0, 0, 0, 100]);
    for (what, f) in [("PING", &ping), ("SETTINGS", &settings)] {
        // 10,000 frames in the bucket cut it: a second here, but a loaded CI machine (the
        // nightly builds beside the tests) once took more than 8 s to get them through, and
        // under ThreadSanitizer, beside this binary's 32 MiB HTTP/2 download, more than 30 s.
        // A server that cuts nothing fails either way; the bound only has to be reached.
        let took = flood(port, f, 1000, Duration::from_millis(1), Duration::from_secs(90));
        assert!(took.is_some(), "a {what} flood (answered and read) was served for 90 s");
    }
    // Ten PINGs a second for three seconds: a keep-alive, not a flood.
    assert_eq!(flood(port, &ping, 1, Duration::from_millis(100), Duration::from_secs(3)), None);
}
