//! Streamed answers that state their length or are aborted, and a WebSocket endpoint
//! beside plain routes on one path.

mod common;
use common::*;
use ember::streaming;
use ember::ws::{self, WsRoute};
use ember::{Dispatch, Request};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

fn server_with_streams() -> (Arc<ember::Server>, u16) {
    server(Dispatch::Pool, |s| {
        s.route(Some(http::Method::GET), "/sized", Arc::new(|r: &Request| {
            let id = r.id();
            streaming::begin(id, 200, b"Content-Length: 10").unwrap();
            streaming::write(id, "01234".into()).unwrap();
            streaming::write(id, "56789".into()).unwrap();
            streaming::end(id).unwrap();
        }))
        .unwrap();
        s.route(Some(http::Method::GET), "/broken", Arc::new(|r: &Request| {
            let id = r.id();
            streaming::begin(id, 200, b"").unwrap();
            streaming::write(id, "partial".into()).unwrap();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                streaming::abort(id).unwrap();
                assert!(streaming::write(id, "more".into()).is_err());
            });
        }))
        .unwrap();
        s.route(Some(http::Method::GET), "/both", Arc::new(|r: &Request| {
            r.respond(200, b"", "plain").unwrap();
        }))
        .unwrap();
        let route = WsRoute::new(
            Arc::new(|ws_id, _r: &Request| ws::accept(ws_id, b"").unwrap()),
            Arc::new(|ws_id, kind, data: &[u8]| drop(ws::send(ws_id, kind, data))),
            Arc::new(|_, _, _: &str| {}),
            None,
        );
        s.websocket("/both", Arc::new(route)).unwrap();
    })
}

#[test]
fn a_streamed_answer_may_state_its_length() {
    let (_s, port) = server_with_streams();
    let resp = get(port, "/sized");
    assert!(resp.contains("content-length: 10") && !resp.to_ascii_lowercase().contains("chunked"), "{resp:?}");
    assert!(resp.ends_with("\r\n\r\n0123456789"), "{resp:?}");
}

#[test]
fn an_aborted_stream_is_cut_not_ended_cleanly() {
    let (_s, port) = server_with_streams();
    let resp = get(port, "/broken");
    assert!(resp.starts_with("HTTP/1.1 200") && resp.contains("partial"), "{resp:?}");
    assert!(!resp.ends_with("0\r\n\r\n"), "an aborted answer must not end with the last chunk: {resp:?}");
}

#[test]
fn a_websocket_endpoint_and_a_plain_route_share_a_path() {
    let (_s, port) = server_with_streams();
    assert!(get(port, "/both").ends_with("plain"));
    let (mut c, _) = tungstenite::client(format!("ws://127.0.0.1:{port}/both"), TcpStream::connect(("127.0.0.1", port)).unwrap()).unwrap();
    c.send(tungstenite::Message::text("hi")).unwrap();
    assert_eq!(c.read().unwrap(), tungstenite::Message::text("hi"));
}
