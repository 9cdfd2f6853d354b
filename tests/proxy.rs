//! The client's address and scheme behind a trusted proxy: PROXY protocol v1/v2 and the
//! Forwarded / X-Forwarded-* headers, believed only from trusted peers.

mod common;
use common::*;
use ember::{Request, Server};
use std::sync::Arc;
use std::time::Duration;

fn who(s: &Server) {
    s.route(Some(http::Method::GET), "/who", Arc::new(|r: &Request| {
        let d = r.data();
        let info = d.info();
        let view = |v: ember::request::StrView| unsafe { String::from_utf8_lossy(std::slice::from_raw_parts(v.ptr.cast::<u8>(), v.len)).into_owned() };
        let body = format!("{} {} {}", d.remote_addr(), view(info.scheme), view(info.peer_addr));
        r.respond(200, b"", body).unwrap();
    }))
    .unwrap();
}

fn start(setup: impl FnOnce(&Server)) -> (Arc<Server>, u16) {
    let s = Arc::new(Server::new());
    setup(&s);
    who(&s);
    s.set_workers(1).unwrap();
    s.start().unwrap();
    let port = s.port(0).unwrap();
    (s, port)
}

#[test]
fn forwarded_headers_count_only_from_trusted_proxies() {
    let (_s, port) = start(|s| {
        s.listen("127.0.0.1:0").unwrap();
        s.add_trusted_proxy("127.0.0.0/8").unwrap();
    });
    let r = exchange(port, b"GET /who HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 198.51.100.4, 203.0.113.7\r\nX-Forwarded-Proto: https\r\nConnection: close\r\n\r\n", Duration::from_secs(3));
    assert!(r.contains("\r\n\r\n203.0.113.7 https 127.0.0.1:"), "{r:?}");
    let (_u, port2) = start(|s| {
        s.listen("127.0.0.1:0").unwrap();
        s.add_trusted_proxy("10.0.0.0/8").unwrap();
    });
    let r = exchange(port2, b"GET /who HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 203.0.113.7\r\nConnection: close\r\n\r\n", Duration::from_secs(3));
    assert!(r.contains("\r\n\r\n127.0.0.1:") && r.contains(" http "), "an untrusted peer cannot claim an address: {r:?}");
}

#[test]
fn proxy_protocol_v1_and_v2_name_the_client_and_a_missing_header_is_refused() {
    let (_s, port) = start(|s| {
        s.listen_spec("127.0.0.1:0", false, true).unwrap();
        s.add_trusted_proxy("127.0.0.1").unwrap();
    });
    let r = exchange(port, b"PROXY TCP4 203.0.113.7 127.0.0.1 56324 80\r\nGET /who HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", Duration::from_secs(3));
    assert!(r.starts_with("HTTP/1.1 200") && r.contains("\r\n\r\n203.0.113.7:56324 http 127.0.0.1:"), "{r:?}");
    // v2: signature, version 2 PROXY, TCP over IPv4, 12 address bytes.
    let mut v2 = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    v2.extend_from_slice(&[0x21, 0x11, 0, 12, 198, 51, 100, 9, 127, 0, 0, 1, 0x30, 0x39, 0, 80]);
    v2.extend_from_slice(b"GET /who HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let r = exchange(port, &v2, Duration::from_secs(3));
    assert!(r.contains("\r\n\r\n198.51.100.9:12345 http"), "{r:?}");
    let r = exchange(port, b"GET /who HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", Duration::from_secs(3));
    assert_eq!(r, "", "no PROXY header: closed without an answer");
}
