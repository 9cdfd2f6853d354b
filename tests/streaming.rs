//! Streamed answers, streamed request bodies, request events and WebSocket, through real
//! sockets.

mod common;
use common::*;
use ember::router::Endpoint;
use ember::streaming;
use ember::ws::{self, Kind, WsRoute};
use ember::{Dispatch, ErrorKind, Event, Request, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

fn events() -> (ember::EventSink, mpsc::Receiver<Event>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    (Arc::new(move |_id, ev| { let _ = tx.lock().unwrap().send(ev); }), rx)
}

/// Decodes a chunked body from a whole HTTP/1.1 answer.
fn dechunk(resp: &str) -> String {
    let body = &resp[resp.find("\r\n\r\n").unwrap() + 4..];
    let mut out = String::new();
    let mut rest = body;
    loop {
        let Some(eol) = rest.find("\r\n") else { break };
        let n = usize::from_str_radix(rest[..eol].trim(), 16).unwrap();
        if n == 0 {
            break;
        }
        out.push_str(&rest[eol + 2..eol + 2 + n]);
        rest = &rest[eol + 2 + n + 2..];
    }
    out
}

fn stream_server(dispatch: Dispatch) -> (Arc<Server>, u16, mpsc::Receiver<Event>) {
    let (sink, rx) = events();
    let (s, port) = server(dispatch, |s| {
        s.route(Some(http::Method::GET), "/count/{n}", Arc::new(move |r: &Request| {
            let id = r.id();
            let n: usize = r.data().param("n").unwrap().parse().unwrap();
            streaming::on_event(id, sink.clone()).unwrap();
            streaming::begin(id, 200, b"Content-Type: text/plain").unwrap();
            std::thread::spawn(move || {
                for i in 0..n {
                    streaming::write(id, format!("line {i}\n").into()).unwrap();
                    std::thread::sleep(Duration::from_millis(2));
                }
                streaming::end(id).unwrap();
            });
        }))
        .unwrap();
    });
    (s, port, rx)
}

#[test]
fn a_streamed_answer_arrives_chunked_from_another_thread_and_completes() {
    for dispatch in [Dispatch::Inline, Dispatch::Pool] {
        let (_s, port, events) = stream_server(dispatch);
        let resp = get(port, "/count/20");
        assert!(resp.starts_with("HTTP/1.1 200") && resp.to_ascii_lowercase().contains("transfer-encoding: chunked"), "{resp:?}");
        let body = dechunk(&resp);
        assert_eq!(body.lines().count(), 20, "{body:?}");
        assert!(body.starts_with("line 0\n") && body.ends_with("line 19\n"));
        assert_eq!(events.recv_timeout(Duration::from_secs(5)).unwrap(), Event::Completed);
    }
}

#[test]
fn a_streamed_answer_to_head_sends_no_body_and_completes_at_its_end() {
    let (_s, port, events) = stream_server(Dispatch::Pool);
    let resp = exchange(port, b"HEAD /count/3 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", Duration::from_secs(3));
    assert!(resp.starts_with("HTTP/1.1 200") && resp.ends_with("\r\n\r\n"), "{resp:?}");
    assert_eq!(events.recv_timeout(Duration::from_secs(5)).unwrap(), Event::Completed);
}

#[test]
fn a_full_stream_queue_refuses_writes_then_says_writable_and_a_departed_client_aborts() {
    let (tx, rx) = mpsc::channel::<(&'static str, Option<Event>)>();
    let tx = Arc::new(Mutex::new(tx));
    let (_s, port) = server(Dispatch::Pool, |s| {
        s.set_limits(|l| Ok(l.stream_queue_bytes = 64 * 1024)).unwrap();
        let tx2 = tx.clone();
        s.route(Some(http::Method::GET), "/flood", Arc::new(move |r: &Request| {
            let id = r.id();
            let t = tx2.clone();
            streaming::on_event(id, Arc::new(move |_, ev| { let _ = t.lock().unwrap().send(("event", Some(ev))); })).unwrap();
            streaming::begin(id, 200, b"").unwrap();
            let t = tx2.clone();
            std::thread::spawn(move || {
                let chunk = bytes::Bytes::from(vec![b'f'; 16 * 1024]);
                loop {
                    match streaming::write(id, chunk.clone()) {
                        Ok(()) => {}
                        Err(e) if e.kind == ErrorKind::WouldBlock => {
                            let _ = t.lock().unwrap().send(("would block", None));
                            match streaming::wait_writable(id, Some(Duration::from_secs(10))) {
                                Ok(_) => {}
                                Err(e) => {
                                    let _ = t.lock().unwrap().send((if e.kind == ErrorKind::ClientGone { "gone" } else { "other" }, None));
                                    return;
                                }
                            }
                        }
                        Err(e) => {
                            let _ = t.lock().unwrap().send((if e.kind == ErrorKind::ClientGone { "gone" } else { "other" }, None));
                            return;
                        }
                    }
                }
            });
        }))
        .unwrap();
    });
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(8 * 1024).unwrap();
    sock.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into()).unwrap();
    let mut c: TcpStream = sock.into();
    c.write_all(b"GET /flood HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    // Not reading: the queue fills and the writer is refused.
    let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(first.0, "would block");
    // Reading some lets it go on (a refused writer is woken, and Writable is told).
    let mut buf = vec![0u8; 1 << 20];
    let t = Instant::now();
    let mut got = 0;
    while got < 4 << 20 && t.elapsed() < Duration::from_secs(10) {
        got += c.read(&mut buf).unwrap();
    }
    assert!(got >= 4 << 20);
    let mut saw_writable = false;
    while let Ok((what, ev)) = rx.recv_timeout(Duration::from_millis(500)) {
        if what == "event" && ev == Some(Event::Writable) {
            saw_writable = true;
            break;
        }
    }
    assert!(saw_writable, "no Writable after the queue drained");
    drop(c);
    let mut outcome = Vec::new();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) && !(outcome.contains(&"gone") && outcome.contains(&"aborted")) {
        if let Ok((what, ev)) = rx.recv_timeout(Duration::from_millis(200)) {
            match (what, ev) {
                ("event", Some(Event::Aborted)) => outcome.push("aborted"),
                ("event", Some(Event::Completed)) => outcome.push("completed"),
                (w, None) => outcome.push(w),
                _ => {}
            }
        }
    }
    assert!(outcome.contains(&"gone") && outcome.contains(&"aborted") && !outcome.contains(&"completed"), "{outcome:?}");
}

fn upload_server(max: u64) -> (Arc<Server>, u16) {
    server(Dispatch::Pool, |s| {
        s.set_limits(|l| Ok(l.max_stream_body_bytes = max)).unwrap();
        s.route_to(
            Some(http::Method::POST),
            "/upload",
            Endpoint::Http {
                stream_body: true,
                pool: false,
                handler: Arc::new(|r: &Request| {
                    let id = r.id();
                    assert_eq!(r.data().info().flags & 1, 1);
                    assert!(r.data().body().is_empty());
                    let mut buf = vec![0u8; 32 * 1024];
                    let mut total = 0usize;
                    let mut sum = 0u64;
                    loop {
                        match streaming::read(id, &mut buf, None) {
                            Ok(0) => break,
                            Ok(n) => {
                                total += n;
                                sum = buf[..n].iter().fold(sum, |a, b| a.wrapping_add(*b as u64));
                            }
                            Err(e) => {
                                let _ = r.respond(599, b"", format!("{:?}", e.kind));
                                return;
                            }
                        }
                    }
                    r.respond(200, b"", format!("{total} {sum}")).unwrap();
                }),
            },
        )
        .unwrap();
    })
}

#[test]
fn a_streamed_body_is_read_in_pieces_with_100_continue_on_the_first_read() {
    let (_s, port) = upload_server(64 << 20);
    let body = vec![3u8; 10 << 20];
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(format!("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n", body.len()).as_bytes())
        .unwrap();
    let mut interim = [0u8; 25];
    c.read_exact(&mut interim).unwrap();
    assert!(interim.starts_with(b"HTTP/1.1 100 Continue"), "{:?}", String::from_utf8_lossy(&interim));
    c.write_all(&body).unwrap();
    let mut resp = String::new();
    c.read_to_string(&mut resp).unwrap();
    assert!(resp.ends_with(&format!("{} {}", body.len(), 3 * body.len())), "{resp:?}");
}

#[test]
fn a_streamed_body_over_the_limit_gets_413_and_the_reader_hears_why() {
    let (_s, port) = upload_server(1 << 20);
    let chunk = "x".repeat(64 * 1024);
    let mut req = String::from("POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    for _ in 0..20 {
        req.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
    }
    req.push_str("0\r\n\r\n");
    for _ in 0..20 {
        let resp = exchange(port, req.as_bytes(), Duration::from_secs(5));
        assert!(resp.starts_with("HTTP/1.1 413"), "{resp:?}");
    }
}

#[test]
fn a_streamed_body_with_broken_chunk_framing_gets_400_and_nothing_behind_it_is_answered() {
    // As for a buffered body: the engine answers 400 and closes, so a request smuggled
    // behind the broken one is never seen (the handler's own answer is then refused).
    let (_s, port) = upload_server(1 << 20);
    for size in ["zz", "ffffffffffffffffff", "-5"] {
        let req = format!("POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{size}\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n");
        let resp = exchange(port, req.as_bytes(), Duration::from_secs(5));
        assert!(resp.starts_with("HTTP/1.1 400"), "{size}: {resp:?}");
        assert_eq!(resp.matches("HTTP/1.1 ").count(), 1, "{size}: one answer only: {resp:?}");
    }
}

#[test]
fn http2_streams_answers_as_data_frames() {
    let (_s, port, events) = stream_server(Dispatch::Pool);
    let body = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
        let client = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
        let r = client.get(format!("http://127.0.0.1:{port}/count/50")).send().await.unwrap();
        assert_eq!(r.version(), http::Version::HTTP_2);
        r.text().await.unwrap()
    });
    assert_eq!(body.lines().count(), 50);
    assert_eq!(events.recv_timeout(Duration::from_secs(5)).unwrap(), Event::Completed);
}

#[test]
fn events_on_an_ended_request_are_refused_and_a_timed_out_one_is_aborted() {
    let (sink, rx) = events();
    let (_s, port) = server(Dispatch::Pool, |s| {
        s.set_limits(|l| Ok(l.handler_timeout = Duration::from_millis(200))).unwrap();
        s.route(Some(http::Method::GET), "/never", Arc::new(move |r: &Request| {
            streaming::on_event(r.id(), sink.clone()).unwrap();
        }))
        .unwrap();
    });
    assert!(get(port, "/never").starts_with("HTTP/1.1 503"));
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Event::Aborted);
}

// ---- WebSocket ----

fn ws_server(dispatch: Dispatch, setup: impl FnOnce(&Server)) -> (Arc<Server>, u16, mpsc::Receiver<(u64, u16)>) {
    let (closed_tx, closed_rx) = mpsc::channel();
    let closed_tx = Mutex::new(closed_tx);
    let (s, port) = server(dispatch, |s| {
        let route = WsRoute::new(
            Arc::new(|ws_id, r: &Request| {
                if r.data().query() == "refuse" {
                    let _ = r.respond(403, b"", "no");
                } else {
                    ws::accept(ws_id, b"X-Hello: 1").unwrap();
                }
            }),
            Arc::new(|ws_id, kind, data: &[u8]| {
                let _ = ws::send(ws_id, kind, data);
            }),
            Arc::new(move |ws_id, code, _reason: &str| { let _ = closed_tx.lock().unwrap().send((ws_id, code)); }),
            None,
        );
        s.websocket("/ws", Arc::new(route)).unwrap();
        setup(s);
    });
    (s, port, closed_rx)
}

#[test]
fn websocket_echoes_text_and_binary_and_reports_the_close() {
    for dispatch in [Dispatch::Inline, Dispatch::Pool] {
        let (_s, port, closed) = ws_server(dispatch, |_| {});
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (mut ws, resp) = tungstenite::client(format!("ws://127.0.0.1:{port}/ws"), stream).unwrap();
        assert_eq!(resp.headers()["x-hello"], "1");
        ws.send(tungstenite::Message::text("héllo")).unwrap();
        assert_eq!(ws.read().unwrap(), tungstenite::Message::text("héllo"));
        ws.send(tungstenite::Message::binary(vec![0u8, 255, 7])).unwrap();
        assert_eq!(ws.read().unwrap(), tungstenite::Message::binary(vec![0u8, 255, 7]));
        ws.close(None).unwrap();
        while ws.read().is_ok() {}
        let (_, code) = closed.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(code, 1005);
    }
}

#[test]
fn websocket_refusal_and_plain_get_and_bad_frames() {
    let (_s, port, _closed) = ws_server(Dispatch::Pool, |s| {
        s.set_limits(|l| Ok(l.ws_max_message_bytes = 1000)).unwrap();
    });
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    match tungstenite::client(format!("ws://127.0.0.1:{port}/ws?refuse"), stream) {
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => assert_eq!(r.status(), 403),
        other => panic!("expected a 403, got {:?}", other.map(|(_, r)| r.status())),
    }
    assert!(get(port, "/ws").starts_with("HTTP/1.1 426"));
    // Too big: 1009.
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (mut ws, _) = tungstenite::client(format!("ws://127.0.0.1:{port}/ws"), stream).unwrap();
    ws.send(tungstenite::Message::binary(vec![1u8; 5000])).unwrap();
    match ws.read() {
        Ok(tungstenite::Message::Close(Some(f))) => assert_eq!(u16::from(f.code), 1009),
        other => panic!("expected close 1009, got {other:?}"),
    }
}

#[test]
fn websocket_broadcast_reaches_every_connection_and_stop_closes_with_1001() {
    let (s, port, closed) = ws_server(Dispatch::Pool, |_| {});
    let mut clients: Vec<_> = (0..5)
        .map(|_| tungstenite::client(format!("ws://127.0.0.1:{port}/ws"), TcpStream::connect(("127.0.0.1", port)).unwrap()).unwrap().0)
        .collect();
    let t = Instant::now();
    let mut sent = 0;
    while sent < 5 && t.elapsed() < Duration::from_secs(5) {
        sent = s.broadcast("/ws", Kind::Text, b"to all", 0).unwrap().sent;
        if sent < 5 {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert_eq!(sent, 5);
    for c in &mut clients {
        assert_eq!(c.read().unwrap(), tungstenite::Message::text("to all"));
    }
    let stopper = s.clone();
    let stop = std::thread::spawn(move || stopper.stop(Duration::from_secs(5)));
    for c in &mut clients {
        match c.read() {
            Ok(tungstenite::Message::Close(Some(f))) => assert_eq!(u16::from(f.code), 1001),
            other => panic!("expected close 1001, got {other:?}"),
        }
        let _ = c.flush();
    }
    stop.join().unwrap().unwrap();
    let codes: Vec<u16> = (0..5).map(|_| closed.recv_timeout(Duration::from_secs(1)).unwrap().1).collect();
    assert!(codes.iter().all(|c| *c == 1001 || *c == 1005), "{codes:?}");
}
