//! Server lifecycle and the deferred-answer rules, through real sockets.

mod common;
use common::*;
use ember::{Dispatch, ErrorKind, Request, Server};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn start_stop_cycles_leave_no_server_behind() {
    for _ in 0..10 {
        let (s, port) = server(Dispatch::Pool, |_| {});
        assert!(get(port, "/").ends_with("hello"));
        s.stop(Duration::from_secs(1)).unwrap();
        s.stop(Duration::from_secs(1)).unwrap(); // idempotent
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "port {port} still accepts");
        assert_eq!(s.start().unwrap_err().kind, ErrorKind::State);
    }
}

#[test]
fn two_servers_run_side_by_side_and_bind_conflicts_are_reported() {
    let (_a, pa) = server(Dispatch::Inline, |_| {});
    let (_b, pb) = server(Dispatch::Pool, |_| {});
    assert_ne!(pa, pb);
    assert!(get(pa, "/").ends_with("hello") && get(pb, "/").ends_with("hello"));
    let c = Server::new();
    c.listen(&format!("127.0.0.1:{pa}")).unwrap();
    let err = c.start().unwrap_err();
    assert_eq!(err.kind, ErrorKind::Bind);
    assert!(err.message.contains(&pa.to_string()), "{}", err.message);
}

#[test]
fn options_after_start_are_refused() {
    let (s, _) = server(Dispatch::Inline, |_| {});
    assert_eq!(s.set_workers(3).unwrap_err().kind, ErrorKind::State);
    assert_eq!(s.route(None, "/late", Arc::new(|_: &Request| {})).unwrap_err().kind, ErrorKind::State);
    assert_eq!(s.port(5).unwrap_err().kind, ErrorKind::InvalidArg);
}

/// Counts how often the handler closure is dropped (what the C layer maps to release).
struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn handlers_are_released_exactly_once_when_stop_returns() {
    for dispatch in [Dispatch::Inline, Dispatch::Pool] {
        let drops = Arc::new(AtomicUsize::new(0));
        let guard = DropCount(drops.clone());
        let (s, port) = server(dispatch, |s| {
            s.route(None, "/x", Arc::new(move |r: &Request| {
                let _ = &guard;
                r.respond(200, b"", "x").unwrap();
            }))
            .unwrap();
        });
        assert!(get(port, "/x").ends_with("x"));
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        s.stop(Duration::from_secs(1)).unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(s);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}

/// Requests that reached the `/slow` handler (none is answered before all are in).
static ARRIVED: (std::sync::Mutex<usize>, std::sync::Condvar) = (std::sync::Mutex::new(0), std::sync::Condvar::new());

fn all_arrived(n: usize, limit: Duration) {
    let (lock, cv) = &ARRIVED;
    let mut arrived = lock.lock().unwrap();
    *arrived += 1;
    cv.notify_all();
    let _ = cv.wait_timeout_while(arrived, limit, |a| *a < n).unwrap();
}

#[test]
fn deferred_answers_from_other_threads_do_not_hold_workers() {
    let (s, port) = server(Dispatch::Inline, |s| {
        s.set_workers(1).unwrap();
        s.route(None, "/slow", Arc::new(|r: &Request| {
            let id = r.id();
            std::thread::spawn(move || {
                // Every answer waits until all 20 requests have reached the handler: with a
                // request holding its worker until answered, the one worker would never let
                // the 20 in, and nothing would be answered in time.
                all_arrived(20, Duration::from_secs(30));
                ember::respond(id, ember::response::answer(200, b"", "late".into()).unwrap()).unwrap();
            });
        }))
        .unwrap();
    });
    let clients: Vec<_> = (0..20).map(|_| std::thread::spawn(move || get(port, "/slow"))).collect();
    for c in clients {
        assert!(c.join().unwrap().ends_with("late"));
    }
    assert_eq!(*ARRIVED.0.lock().unwrap(), 20, "not all requests reached the handler before the first answer");
    assert_eq!(s.stats().responses_2xx, 20);
}

#[test]
fn late_double_and_orphaned_answers_get_precise_errors() {
    let (tx, rx) = mpsc::channel::<u64>();
    let tx = Mutex::new(tx);
    let (s, port) = server(Dispatch::Pool, |s| {
        s.set_limits(|l| Ok(l.handler_timeout = Duration::from_millis(300))).unwrap();
        s.route(None, "/hold", Arc::new(move |r: &Request| tx.lock().unwrap().send(r.id()).unwrap())).unwrap();
    });
    let ok = || ember::response::answer(200, b"", "x".into()).unwrap();
    // Timed out: the engine answered 503 first.
    let resp = get(port, "/hold");
    assert!(resp.starts_with("HTTP/1.1 503"), "{resp}");
    let timed_out = rx.recv().unwrap();
    assert_eq!(ember::respond(timed_out, ok()).unwrap_err().kind, ErrorKind::TimedOut);
    // Answered twice.
    let client = std::thread::spawn(move || get(port, "/hold"));
    let id = rx.recv().unwrap();
    ember::respond(id, ok()).unwrap();
    assert_eq!(ember::respond(id, ok()).unwrap_err().kind, ErrorKind::AlreadyAnswered);
    assert!(client.join().unwrap().ends_with("x"));
    // The client left before the answer.
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(&mut c, b"GET /hold HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let id = rx.recv().unwrap();
    drop(c);
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(ember::respond(id, ok()).unwrap_err().kind, ErrorKind::ClientGone);
    // Never issued.
    assert_eq!(ember::respond(0xdead_beef, ok()).unwrap_err().kind, ErrorKind::InvalidHandle);
    s.stop(Duration::from_millis(100)).unwrap();
}

#[test]
fn stop_from_inside_a_handler_does_not_deadlock() {
    let slot: Arc<Mutex<Option<Arc<Server>>>> = Arc::new(Mutex::new(None));
    let inner = slot.clone();
    let (s, port) = server(Dispatch::Pool, move |s| {
        s.route(None, "/quit", Arc::new(move |r: &Request| {
            r.respond(200, b"", "bye").unwrap();
            let me = inner.lock().unwrap().clone().unwrap();
            me.stop(Duration::from_secs(2)).unwrap();
        }))
        .unwrap();
    });
    *slot.lock().unwrap() = Some(s.clone());
    assert!(get(port, "/quit").ends_with("bye"));
    s.wait(Some(Duration::from_secs(5))).unwrap();
    assert!(!s.is_running());
    slot.lock().unwrap().take();
}

#[test]
fn stop_waits_for_in_flight_requests_then_force_closes_at_timeout() {
    let (s, port) = server(Dispatch::Pool, |s| {
        s.route(None, "/sleep/{ms}", Arc::new(|r: &Request| {
            let ms: u64 = r.data().param("ms").unwrap().parse().unwrap();
            std::thread::sleep(Duration::from_millis(ms));
            let _ = r.respond(200, b"", "done");
        }))
        .unwrap();
    });
    let quick = std::thread::spawn(move || get(port, "/sleep/200"));
    std::thread::sleep(Duration::from_millis(50));
    s.stop(Duration::from_secs(3)).unwrap();
    assert!(quick.join().unwrap().ends_with("done"), "in-flight request finished during stop");

    let (s, port) = server(Dispatch::Inline, |s| {
        s.route(None, "/never", Arc::new(|_: &Request| {})).unwrap();
    });
    let stuck = std::thread::spawn(move || get(port, "/never"));
    std::thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    s.stop(Duration::from_millis(200)).unwrap();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert_eq!(stuck.join().unwrap(), "", "the unanswered request was closed");
}

#[test]
fn a_panicking_handler_answers_500_and_the_server_keeps_serving() {
    let (s, port) = server(Dispatch::Pool, |s| {
        s.set_logger(ember::log::Logger::new(Some(Arc::new(|_, _| {})), ember::log::Level::Error)).unwrap();
        s.route(None, "/boom", Arc::new(|_: &Request| panic!("boom"))).unwrap();
    });
    assert!(get(port, "/boom").starts_with("HTTP/1.1 500"));
    assert!(get(port, "/").ends_with("hello"));
    let st = s.stats();
    assert_eq!((st.responses_5xx, st.responses_2xx), (1, 1));
    assert!(st.bytes_read > 0 && st.bytes_written > 0);
}
