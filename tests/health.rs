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
