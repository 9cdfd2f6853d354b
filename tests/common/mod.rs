//! A listening engine and a raw-socket HTTP client for the integration tests.

#![allow(dead_code)]

use ember::{Dispatch, Request, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn server(dispatch: Dispatch, setup: impl FnOnce(&Server)) -> (Arc<Server>, u16) {
    let s = Arc::new(Server::new());
    s.listen("127.0.0.1:0").unwrap();
    s.set_dispatch(dispatch).unwrap();
    s.set_workers(2).unwrap();
    s.route(Some(http::Method::GET), "/", Arc::new(|r: &Request| {
        r.respond(200, b"Content-Type: text/plain\r\n", "hello").unwrap();
    }))
    .unwrap();
    setup(&s);
    s.start().unwrap();
    let port = s.port(0).unwrap();
    (s, port)
}

/// Sends raw bytes, reads until the server closes or `wait` passes.
pub fn exchange(port: u16, request: &[u8], wait: Duration) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(wait)).unwrap();
    c.write_all(request).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn get(port: u16, path: &str) -> String {
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    exchange(port, req.as_bytes(), Duration::from_secs(10))
}

/// Polls `f` every 20 ms until it holds or `limit` has passed; the last poll decides.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}
