//! HTTP behaviour of the engine through real sockets.

mod common;
use common::*;
use ember::Dispatch;
use std::time::Duration;

#[test]
fn malformed_request_line_gets_400() {
    let (s, port) = server(Dispatch::Inline, |_| {});
    let resp = exchange(port, b"GARBAGE\r\n\r\n", Duration::from_secs(3));
    assert!(resp.starts_with("HTTP/1.1 400"), "got {resp:?}");
    s.stop(Duration::from_secs(1)).unwrap();
}
