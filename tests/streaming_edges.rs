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

/// A host that reads its streamed body at its own pace (here from another thread, as a
/// deferred handler does) must hear why the body stopped when the engine refused it
/// (413) between two reads, not just that "the request was answered": the header
/// promises `EMBER_ERR_TOO_LARGE`. Its answer attempt afterwards hears the same.
#[test]
fn a_reader_between_reads_when_the_engine_answers_413_hears_too_large() {
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let (_s, port) = server(Dispatch::Pool, move |s| {
        s.set_limits(|l| Ok(l.max_stream_body_bytes = 256 * 1024)).unwrap();
        let tx = std::sync::Mutex::new(tx.lock().unwrap().clone());
        s.route_to(
            Some(http::Method::POST),
            "/slow-reader",
            ember::router::Endpoint::Http {
                stream_body: true,
                pool: false,
                handler: Arc::new(move |r: &Request| {
                    let id = r.id();
                    let tx = tx.lock().unwrap().clone();
                    std::thread::spawn(move || {
                        let mut buf = vec![0u8; 16 * 1024];
                        let err = loop {
                            std::thread::sleep(Duration::from_millis(20));
                            if let Err(e) = streaming::read(id, &mut buf, Some(Duration::ZERO)) {
                                if e.kind != ember::ErrorKind::WouldBlock {
                                    break e.kind;
                                }
                            }
                        };
                        let answer = ember::response::answer(200, b"", "late".into()).and_then(|a| ember::respond(id, a)).map_err(|e| e.kind);
                        tx.send((err, answer)).unwrap();
                    });
                }),
            },
        )
        .unwrap();
    });
    let chunk = "x".repeat(64 * 1024);
    let mut req = String::from("POST /slow-reader HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    for _ in 0..16 {
        req.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
    }
    req.push_str("0\r\n\r\n");
    let resp = exchange(port, req.as_bytes(), Duration::from_secs(10));
    assert!(resp.starts_with("HTTP/1.1 413"), "{resp:?}");
    let (read_err, answer) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(read_err, ember::ErrorKind::TooLarge);
    assert_eq!(answer, Err(ember::ErrorKind::TooLarge));
}

fn never_reading_or_slow_client_server() -> (Arc<ember::Server>, u16) {
    server(Dispatch::Pool, |s| {
        s.set_limits(|l| Ok(l.handler_timeout = Duration::from_millis(400))).unwrap();
        let streamed = |handler: ember::Handler| ember::router::Endpoint::Http { stream_body: true, pool: false, handler };
        // Keeps the request and never reads nor answers.
        s.route_to(Some(http::Method::POST), "/ignore", streamed(Arc::new(|_: &Request| {}))).unwrap();
        // Reads everything as it comes, then answers with the byte count.
        s.route_to(Some(http::Method::POST), "/count", streamed(Arc::new(|r: &Request| {
            let id = r.id();
            std::thread::spawn(move || {
                let (mut buf, mut n) = (vec![0u8; 4096], 0);
                loop {
                    match streaming::read(id, &mut buf, Some(Duration::from_secs(5))) {
                        Ok(0) => break,
                        Ok(k) => n += k,
                        Err(e) if e.kind == ember::ErrorKind::WouldBlock => {}
                        Err(_) => return,
                    }
                }
                ember::response::answer(200, b"", n.to_string().into()).and_then(|a| ember::respond(id, a)).unwrap();
            });
        })))
        .unwrap();
    })
}

/// A host that takes a streamed-body request and never reads it used to hold the client
/// forever: the handler timeout only started once the body was in, which never came.
#[test]
fn a_host_that_never_reads_its_streamed_body_is_timed_out() {
    let (_s, port) = never_reading_or_slow_client_server();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    use std::io::{Read, Write};
    c.write_all(b"POST /ignore HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n").unwrap();
    c.write_all(&[b'x'; 1000]).unwrap();
    let t = std::time::Instant::now();
    let mut head = [0u8; 12];
    c.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 503", "after {:?}", t.elapsed());
}

/// The same timeout does not run while the host waits for a slow client.
#[test]
fn a_slow_client_of_a_streamed_body_is_not_the_hosts_timeout() {
    let (_s, port) = never_reading_or_slow_client_server();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    use std::io::{Read, Write};
    c.write_all(b"POST /count HTTP/1.1\r\nHost: t\r\nContent-Length: 30\r\nConnection: close\r\n\r\n").unwrap();
    for _ in 0..3 {
        // Each pause is longer than the handler timeout.
        std::thread::sleep(Duration::from_millis(700));
        c.write_all(&[b'x'; 10]).unwrap();
    }
    let mut resp = String::new();
    c.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200") && resp.ends_with("\r\n\r\n30"), "{resp:?}");
}
