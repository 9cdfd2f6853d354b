//! The engine's health path and drain mode (issue 12: running a fleet behind a balancer).

mod common;
use common::*;
use ember::Dispatch;
use std::time::Duration;

#[test]
fn health_answers_ok_then_503_while_draining_and_answers_close_their_connections() {
    let (s, port) = server(Dispatch::Auto, |s| s.set_health_path("/healthz").unwrap());
    let ok = get(port, "/healthz");
    assert!(ok.starts_with("HTTP/1.1 200") && ok.ends_with("{\"status\": \"ok\"}"), "{ok:?}");
    let keep = exchange(port, b"GET / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n", Duration::from_millis(500));
    assert_eq!(keep.matches("HTTP/1.1 200").count(), 2, "keep-alive before draining: {keep:?}");
    s.drain().unwrap();
    s.drain().unwrap();
    let draining = get(port, "/healthz");
    assert!(draining.starts_with("HTTP/1.1 503") && draining.contains("draining"), "{draining:?}");
    // The first answer closes the connection: the pipelined second request is not served here.
    let closed = exchange(port, b"GET / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n", Duration::from_secs(3));
    assert_eq!(closed.matches("HTTP/1.1 200").count(), 1, "{closed:?}");
    assert!(closed.contains("connection: close"), "{closed:?}");
    assert!(get(port, "/").ends_with("hello"), "new connections are still served while draining");
    assert!(s.set_health_path("/late").is_err());
}

#[test]
fn stop_accepting_refuses_new_connections_and_serves_the_open_ones_with_close() {
    use std::io::{Read, Write};
    let (s, port) = server(Dispatch::Auto, |s| s.set_health_path("/healthz").unwrap());
    let mut kept = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    kept.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = [0u8; 4096];
    let n = kept.read(&mut buf).unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&buf[..n]));
    s.stop_accepting().unwrap();
    s.stop_accepting().unwrap();
    // The listener closes on the server's own threads: wait for the refusal, no timing assumed.
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        std::thread::sleep(Duration::from_millis(5));
    }
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut out = Vec::new();
    kept.read_to_end(&mut out).unwrap();
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 503") && out.contains("connection: close"), "{out:?}");
    s.stop(Duration::from_secs(5)).unwrap();
    assert!(s.stop_accepting().is_err(), "stop_accepting needs a running server");
}
