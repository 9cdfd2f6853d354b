//! HTTP behaviour of the engine through real sockets.

mod common;
use common::*;
use ember::{Dispatch, Request};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(3);

fn echo_server(setup: impl FnOnce(&ember::Server)) -> (Arc<ember::Server>, u16) {
    server(Dispatch::Inline, |s| {
        s.route(Some(http::Method::POST), "/echo", Arc::new(|r: &Request| {
            r.respond(200, b"", r.data().body().clone()).unwrap();
        }))
        .unwrap();
        setup(s);
    })
}

#[test]
fn malformed_request_line_gets_400() {
    let (_s, port) = server(Dispatch::Inline, |_| {});
    let resp = exchange(port, b"GARBAGE\r\n\r\n", WAIT);
    assert!(resp.starts_with("HTTP/1.1 400"), "got {resp:?}");
}

#[test]
fn differing_content_lengths_get_400() {
    let (_s, port) = echo_server(|_| {});
    let resp = exchange(port, b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", WAIT);
    assert!(resp.starts_with("HTTP/1.1 400"), "got {resp:?}");
}

#[test]
fn content_length_with_chunked_is_read_by_chunked_and_closed_so_nothing_is_smuggled() {
    let (_s, port) = echo_server(|_| {});
    let req = b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 30\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n";
    let resp = exchange(port, req, WAIT);
    assert!(resp.starts_with("HTTP/1.1 200"), "got {resp:?}");
    assert!(resp.ends_with("ok"), "body read by chunked: {resp:?}");
    assert_eq!(resp.matches("HTTP/1.1").count(), 1, "the smuggled request must not be answered: {resp:?}");
}

#[test]
fn oversized_header_block_gets_431() {
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.set_limits(|l| Ok(l.max_header_bytes = 4096)).unwrap();
    });
    let req = format!("GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n", "a".repeat(6000));
    let resp = exchange(port, req.as_bytes(), WAIT);
    assert!(resp.starts_with("HTTP/1.1 431"), "got {resp:?}");
}

#[test]
fn too_many_headers_get_431() {
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.set_limits(|l| Ok(l.max_headers = 10)).unwrap();
    });
    let headers: String = (0..20).map(|i| format!("X-{i}: 1\r\n")).collect();
    let resp = exchange(port, format!("GET / HTTP/1.1\r\nHost: t\r\n{headers}\r\n").as_bytes(), WAIT);
    assert!(resp.starts_with("HTTP/1.1 431"), "got {resp:?}");
}

#[test]
fn declared_body_over_limit_gets_413_without_being_sent() {
    let (_s, port) = echo_server(|s| {
        s.set_limits(|l| Ok(l.max_body_bytes = 1000)).unwrap();
    });
    let resp = exchange(port, b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n", WAIT);
    assert!(resp.starts_with("HTTP/1.1 413"), "got {resp:?}");
    assert!(resp.contains("connection: close"));
}

#[test]
fn chunked_body_over_limit_gets_413() {
    let (_s, port) = echo_server(|s| {
        s.set_limits(|l| Ok(l.max_body_bytes = 1000)).unwrap();
    });
    let chunk = "a".repeat(600);
    let req = format!("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n{chunk}\r\n258\r\n{chunk}\r\n0\r\n\r\n");
    let resp = exchange(port, req.as_bytes(), WAIT);
    assert!(resp.starts_with("HTTP/1.1 413"), "got {resp:?}");
}

#[test]
fn slow_header_gets_408_and_close() {
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.set_limits(|l| Ok(l.header_timeout = Duration::from_millis(300))).unwrap();
    });
    let t = Instant::now();
    let resp = exchange(port, b"GET / HTTP/1.1\r\nHo", WAIT);
    assert!(resp.starts_with("HTTP/1.1 408"), "got {resp:?}");
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn silent_connection_is_closed_at_the_header_timeout() {
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.set_limits(|l| Ok(l.header_timeout = Duration::from_millis(300))).unwrap();
    });
    let t = Instant::now();
    assert_eq!(exchange(port, b"", WAIT), "");
    assert!(t.elapsed() < Duration::from_secs(2), "closed after {:?}", t.elapsed());
}

#[test]
fn idle_keep_alive_connection_is_closed_after_idle_timeout() {
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.set_limits(|l| Ok(l.idle_timeout = Duration::from_millis(400))).unwrap();
    });
    let t = Instant::now();
    let resp = exchange(port, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n", WAIT);
    assert!(resp.starts_with("HTTP/1.1 200") && resp.ends_with("hello"), "got {resp:?}");
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(350) && took < Duration::from_secs(2), "closed after {took:?}");
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let (_s, port) = server(Dispatch::Pool, |s| {
        s.route(Some(http::Method::GET), "/n/{n}", Arc::new(|r: &Request| {
            let n = r.data().param("n").unwrap().to_owned();
            r.respond(200, b"", n).unwrap();
        }))
        .unwrap();
    });
    let req = b"GET /n/1 HTTP/1.1\r\nHost: t\r\n\r\nGET /n/2 HTTP/1.1\r\nHost: t\r\n\r\nGET /n/3 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let resp = exchange(port, req, WAIT);
    let bodies: Vec<&str> = resp.split("\r\n\r\n").skip(1).map(|b| &b[..1]).collect();
    assert_eq!(bodies, ["1", "2", "3"], "got {resp:?}");
}

#[test]
fn head_keeps_length_and_drops_body_and_unknown_method_gets_405_with_allow() {
    let (_s, port) = server(Dispatch::Inline, |_| {});
    let head = exchange(port, b"HEAD / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", WAIT);
    assert!(head.starts_with("HTTP/1.1 200") && head.contains("content-length: 5") && head.ends_with("\r\n\r\n"), "{head:?}");
    let del = exchange(port, b"DELETE / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", WAIT);
    assert!(del.starts_with("HTTP/1.1 405") && del.contains("allow: GET, HEAD"), "{del:?}");
    assert!(get(port, "/nope").starts_with("HTTP/1.1 404"));
}

#[test]
fn http2_prior_knowledge_is_detected_on_the_same_port() {
    let (_s, port) = server(Dispatch::Inline, |_| {});
    // A client preface followed by an empty SETTINGS frame: the server must answer with
    // its own SETTINGS frame (type 0x4), which proves it switched to HTTP/2.
    let mut req = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    req.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    let resp = exchange(port, &req, Duration::from_millis(500));
    let bytes = resp.as_bytes();
    assert!(bytes.len() >= 9 && bytes[3] == 4, "expected a SETTINGS frame, got {resp:?}");
}

#[test]
fn http11_request_needs_exactly_one_host_header() {
    let (_s, port) = server(Dispatch::Inline, |_| {});
    let none = exchange(port, b"GET / HTTP/1.1\r\n\r\n", WAIT);
    assert!(none.starts_with("HTTP/1.1 400"), "{none:?}");
    let two = exchange(port, b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", WAIT);
    assert!(two.starts_with("HTTP/1.1 400"), "{two:?}");
    let old = exchange(port, b"GET / HTTP/1.0\r\n\r\n", WAIT);
    assert!(old.starts_with("HTTP/1.0 200") || old.starts_with("HTTP/1.1 200"), "{old:?}");
}

#[test]
fn partial_request_pipelined_behind_a_complete_one_gets_408() {
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.set_limits(|l| {
            l.header_timeout = Duration::from_millis(300);
            l.idle_timeout = Duration::from_secs(5);
            Ok(())
        })
        .unwrap();
    });
    let t = Instant::now();
    let resp = exchange(port, b"GET / HTTP/1.1\r\nHost: t\r\n\r\nGET /sec", WAIT);
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp:?}");
    assert!(resp.contains("HTTP/1.1 408"), "{resp:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "took {:?}", t.elapsed());
}

#[test]
fn partial_http2_preface_gets_408_not_a_reset() {
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.set_limits(|l| Ok(l.header_timeout = Duration::from_millis(300))).unwrap();
    });
    let resp = exchange(port, b"PRI * HTTP/2.0\r\n", WAIT);
    assert!(resp.starts_with("HTTP/1.1 408"), "{resp:?}");
}

/// Slow answers on several connections are held back for one pass of the I/O thread so
/// that they leave together (src/conn/io.rs, `hold_first_write`): every answer must
/// still arrive, whole and in order, pipelined or not, after a body or without one,
/// with a connection that is alone (no hold) among them at the start.
#[test]
fn slow_answers_held_for_the_others_all_arrive_in_order() {
    use std::io::{Read, Write};
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.route(None, "/slow", Arc::new(|r: &Request| {
            // Well past the hold threshold (some 7 µs): the hold is taken whenever
            // another connection is open.
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_micros(300) {
                std::hint::spin_loop();
            }
            let body = format!("{}?{}:{}", r.data().path(), r.data().query(), r.data().body().len());
            r.respond(200, b"", body.into_bytes()).unwrap();
        }))
        .unwrap();
    });
    // Alone first: nothing to gather.
    assert!(get(port, "/slow?alone").ends_with("/slow?alone:0"));
    let clients: Vec<_> = (0..8)
        .map(|c| {
            std::thread::spawn(move || {
                let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut want = String::new();
                for round in 0..20 {
                    // Three pipelined requests per round, the middle one with a body.
                    let mut out = Vec::new();
                    for i in 0..3 {
                        let target = format!("/slow?c={c}&r={round}&i={i}");
                        if i == 1 {
                            out.extend_from_slice(format!("POST {target} HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello").as_bytes());
                            want.push_str(&format!("{target}:5|"));
                        } else {
                            out.extend_from_slice(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
                            want.push_str(&format!("{target}:0|"));
                        }
                    }
                    conn.write_all(&out).unwrap();
                }
                // Read the 60 answers: each has a Content-Length.
                let mut got = String::new();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let mut answers = 0;
                while answers < 60 {
                    let n = conn.read(&mut chunk).expect("answers stopped coming");
                    assert!(n > 0, "connection closed after {answers} answers");
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        assert!(head.starts_with("HTTP/1.1 200"), "got {head:?}");
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().parse().unwrap()))
                            .expect("a Content-Length");
                        if buf.len() < end + 4 + len {
                            break;
                        }
                        got.push_str(&String::from_utf8_lossy(&buf[end + 4..end + 4 + len]));
                        got.push('|');
                        buf.drain(..end + 4 + len);
                        answers += 1;
                    }
                }
                assert_eq!(got, want, "connection {c}");
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
}
