//! Regression tests for the answer and limit defects found by reading the core (issue 13):
//! stop from engine callbacks, answers the host was told got through, explicit HEAD lengths,
//! HTTP/2 limits, and statuses. The timing defects are in hardening_timeouts.rs. Each goes
//! through a real socket or the C ABI.

mod common;
use common::*;
use ember::{Dispatch, Request, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

// 6. stop from a log, release or thread-hook callback does not deadlock.

#[test]
fn stop_from_a_log_callback_on_an_engine_thread_does_not_deadlock() {
    let holder: Arc<Mutex<Option<Arc<Server>>>> = Arc::new(Mutex::new(None));
    let seen = holder.clone();
    let s = Arc::new(Server::new());
    s.listen("127.0.0.1:0").unwrap();
    s.set_dispatch(Dispatch::Inline).unwrap();
    s.set_limits(|l| Ok(l.handler_timeout = Duration::from_millis(100))).unwrap();
    s.set_logger(ember::log::Logger::new(
        Some(Arc::new(move |_level, msg: &str| {
            if msg.contains("no answer within") {
                if let Some(server) = seen.lock().unwrap().clone() {
                    server.stop(Duration::from_secs(1)).unwrap();
                }
            }
        })),
        ember::log::Level::Info,
    ))
    .unwrap();
    s.route(Some(http::Method::GET), "/never", Arc::new(|_: &Request| {})).unwrap();
    s.start().unwrap();
    *holder.lock().unwrap() = Some(s.clone());
    let port = s.port(0).unwrap();
    let resp = get(port, "/never");
    assert!(resp.starts_with("HTTP/1.1 503"), "{resp:?}");
    s.wait(Some(Duration::from_secs(5))).expect("the server stopped without a deadlock");
    holder.lock().unwrap().take();
}

#[test]
fn stop_from_a_thread_hook_or_a_release_callback_does_not_deadlock() {
    struct StopOnDrop(Arc<Mutex<Option<Arc<Server>>>>, Arc<AtomicUsize>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            if let Some(s) = self.0.lock().unwrap().clone() {
                s.stop(Duration::from_secs(1)).unwrap();
                assert!(s.wait(Some(Duration::from_millis(10))).is_err(), "wait from inside must refuse, not block");
            }
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }
    let holder: Arc<Mutex<Option<Arc<Server>>>> = Arc::new(Mutex::new(None));
    let hook_stops = Arc::new(AtomicUsize::new(0));
    let released = Arc::new(AtomicUsize::new(0));
    let s = Arc::new(Server::new());
    s.listen("127.0.0.1:0").unwrap();
    let (h, n) = (holder.clone(), hook_stops.clone());
    s.set_hooks(ember::Hooks {
        on_start: None,
        on_stop: Some(Arc::new(move || {
            if let Some(s) = h.lock().unwrap().clone() {
                s.stop(Duration::from_secs(1)).unwrap();
                n.fetch_add(1, Ordering::SeqCst);
            }
        })),
    })
    .unwrap();
    let guard = StopOnDrop(holder.clone(), released.clone());
    s.route(Some(http::Method::GET), "/", Arc::new(move |r: &Request| {
        let _ = &guard;
        r.respond(200, b"", "hi").unwrap();
    }))
    .unwrap();
    s.start().unwrap();
    *holder.lock().unwrap() = Some(s.clone());
    assert!(get(s.port(0).unwrap(), "/").ends_with("hi"));
    let (tx, rx) = mpsc::channel();
    let stopper = s.clone();
    std::thread::spawn(move || tx.send(stopper.stop(Duration::from_secs(1))).unwrap());
    rx.recv_timeout(Duration::from_secs(10)).expect("stop deadlocked").unwrap();
    assert_eq!(released.load(Ordering::SeqCst), 1, "the route was released exactly once");
    assert!(hook_stops.load(Ordering::SeqCst) >= 1, "the thread hooks ran");
    holder.lock().unwrap().take();
}

// 7. When the host was told its answer got through, the client gets it, not a 503.

#[test]
fn the_handler_timeout_never_overrules_an_answer_the_host_was_told_got_through() {
    let outcomes: Arc<Mutex<Vec<(u64, i32)>>> = Arc::new(Mutex::new(Vec::new()));
    let seen = outcomes.clone();
    let body = Arc::new(vec![b'z'; 48 << 20]);
    let (_s, port) = server(Dispatch::Pool, |s| {
        s.set_limits(|l| Ok(l.handler_timeout = Duration::from_millis(50))).unwrap();
        s.route(Some(http::Method::GET), "/race/{us}", Arc::new(move |r: &Request| {
            let us: u64 = r.data().param("us").unwrap().parse().unwrap();
            std::thread::sleep(Duration::from_micros(us));
            // The copying answer claims first and copies 48 MiB after: a wide window for the timer.
            let rc = unsafe { ember::ffi::request::ember_request_respond(r.id(), 200, std::ptr::null(), 0, body.as_ptr().cast(), body.len()) };
            seen.lock().unwrap().push((us, rc));
        }))
        .unwrap();
    });
    let mut mismatches = Vec::new();
    for i in 0..40u64 {
        let us = 30_000 + i * 1_000;
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(format!("GET /race/{us} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
        let mut head = [0u8; 12];
        c.read_exact(&mut head).unwrap();
        let status = String::from_utf8_lossy(&head[9..12]).into_owned();
        drop(c);
        assert!(wait_until(Duration::from_secs(5), || outcomes.lock().unwrap().iter().any(|(u, _)| *u == us)));
        let rc = outcomes.lock().unwrap().iter().find(|(u, _)| *u == us).unwrap().1;
        let consistent = (status == "200" && rc == 0) || (status == "503" && rc == ember::ffi::constants::EMBER_ERR_TIMED_OUT);
        if !consistent {
            mismatches.push((us, status, rc));
        }
    }
    assert!(mismatches.is_empty(), "client status and the host's result disagree: {mismatches:?}");
}

// 8. An explicit HEAD route states its own Content-Length.

#[test]
fn an_explicit_head_route_may_state_the_length_of_what_get_would_send() {
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.route(Some(http::Method::HEAD), "/file", Arc::new(|r: &Request| {
            r.respond(200, b"Content-Length: 123456\r\nContent-Type: application/zip", "").unwrap();
        }))
        .unwrap();
    });
    let resp = exchange(port, b"HEAD /file HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", Duration::from_secs(3));
    assert!(resp.starts_with("HTTP/1.1 200") && resp.contains("content-length: 123456"), "{resp:?}");
    assert!(resp.ends_with("\r\n\r\n"), "no body on HEAD: {resp:?}");
}

// 9. HTTP/2 limits: header count, a header-list limit above u32, the connection's body budget.

fn h2_client() -> reqwest::Client {
    reqwest::Client::builder().http2_prior_knowledge().build().unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn http2_requests_with_too_many_headers_get_431() {
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.set_limits(|l| Ok(l.max_headers = 20)).unwrap();
    });
    rt().block_on(async {
        let client = h2_client();
        let mut req = client.get(format!("http://127.0.0.1:{port}/"));
        for i in 0..40 {
            req = req.header(format!("x-h{i}"), "1");
        }
        assert_eq!(req.send().await.unwrap().status(), 431);
        let ok = client.get(format!("http://127.0.0.1:{port}/")).send().await.unwrap();
        assert_eq!(ok.status(), 200, "the connection still serves");
    });
}

#[test]
fn an_http2_header_list_limit_above_u32_is_not_cut_down_to_a_tiny_one() {
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.set_limits(|l| Ok(l.max_header_bytes = (u32::MAX as usize) + 2048)).unwrap();
    });
    rt().block_on(async {
        let resp = h2_client().get(format!("http://127.0.0.1:{port}/")).header("x-a", "b".repeat(4000)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    });
}

#[test]
fn http2_bodies_buffered_on_one_connection_are_capped_together() {
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let gate = Arc::new(Mutex::new(gate_rx));
    let (s, port) = server(Dispatch::Pool, |s| {
        s.set_limits(|l| {
            l.max_body_bytes = 1 << 20;
            l.max_conn_body_bytes = 1 << 20;
            Ok(())
        })
        .unwrap();
        s.route(Some(http::Method::POST), "/hold", Arc::new(move |r: &Request| {
            let _ = gate.lock().unwrap().recv_timeout(Duration::from_secs(5));
            r.respond(200, b"", r.data().body().len().to_string()).unwrap();
        }))
        .unwrap();
    });
    let statuses = rt().block_on(async {
        let client = h2_client();
        let url = format!("http://127.0.0.1:{port}/hold");
        let first = tokio::spawn(client.post(&url).body(vec![1u8; 700 << 10]).send());
        // Wait until the first body is buffered and handed to its (blocked) handler.
        while s.stats().held_requests < 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let second = client.post(&url).body(vec![2u8; 700 << 10]).send().await.unwrap().status();
        gate_tx.send(()).unwrap();
        let first = first.await.unwrap().unwrap().status();
        (first, second)
    });
    assert_eq!(statuses, (http::StatusCode::OK, http::StatusCode::SERVICE_UNAVAILABLE));
}

// 12. Statuses: 600-999 are not server errors; 1xx cannot end a request.

#[test]
fn statuses_above_599_are_counted_apart_and_1xx_answers_are_refused() {
    let refused = Arc::new(Mutex::new(None));
    let r2 = refused.clone();
    let (s, port) = server(Dispatch::Inline, |s| {
        s.route(Some(http::Method::GET), "/odd", Arc::new(move |r: &Request| {
            *r2.lock().unwrap() = Some(r.respond(103, b"", "").unwrap_err().message);
            r.respond(799, b"", "odd").unwrap();
        }))
        .unwrap();
    });
    let before = s.stats();
    assert!(get(port, "/odd").starts_with("HTTP/1.1 799"));
    let after = s.stats();
    assert_eq!(after.responses_other - before.responses_other, 1);
    assert_eq!(after.responses_5xx, before.responses_5xx);
    let msg = refused.lock().unwrap().clone().unwrap();
    assert!(msg.contains("informational"), "{msg}");
}
