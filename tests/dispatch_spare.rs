//! Auto dispatch's spare I/O worker stays asleep while no handler blocks, and wakes when
//! one does. Alone in its test binary: it tells the server's threads apart from others by
//! name, so no other server may run in the process.

use ember::{Request, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// CPU nanoseconds of every `ember-io` thread of this process, by thread id.
fn io_threads_cpu() -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = entry.unwrap().path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if name.trim() != "ember-io" {
            continue;
        }
        // The first field of schedstat: time spent on the CPU, in ns (no 10 ms ticks).
        let stat = std::fs::read_to_string(dir.join("schedstat")).unwrap();
        let ns = stat.split_whitespace().next().unwrap().parse().unwrap();
        out.push((dir.file_name().unwrap().to_string_lossy().into_owned(), ns));
    }
    out.sort();
    out
}

/// Keep-alive GETs of `/` on `conns` connections for `how_long`; the number answered.
fn load(port: u16, conns: usize, how_long: Duration) -> usize {
    let clients: Vec<_> = (0..conns)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let (mut n, mut buf, t) = (0, [0u8; 512], Instant::now());
                while t.elapsed() < how_long {
                    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                    let mut got = Vec::new();
                    while !got.ends_with(b"\r\n\r\nok") {
                        let k = s.read(&mut buf).unwrap();
                        assert!(k > 0, "closed after {n} answers");
                        got.extend_from_slice(&buf[..k]);
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    clients.into_iter().map(|c| c.join().unwrap()).sum()
}

/// CPU each I/O thread spent during `load`, busiest first.
fn cpu_during(port: u16) -> (Vec<u64>, usize) {
    let before = io_threads_cpu();
    let answered = load(port, 8, Duration::from_millis(1500));
    let after = io_threads_cpu();
    let mut spent: Vec<u64> = after
        .iter()
        .map(|(tid, ns)| ns - before.iter().find(|(t, _)| t == tid).map_or(0, |b| b.1))
        .collect();
    spent.sort_unstable_by(|a, b| b.cmp(a));
    (spent, answered)
}

#[test]
fn the_spare_io_worker_sleeps_under_fast_handlers_and_serves_while_one_blocks() {
    let s = Arc::new(Server::new());
    s.listen("127.0.0.1:0").unwrap();
    s.set_workers(1).unwrap();
    s.route(Some(http::Method::GET), "/", Arc::new(|r: &Request| r.respond(200, b"", "ok").unwrap())).unwrap();
    s.route(Some(http::Method::GET), "/block", Arc::new(|r: &Request| {
        std::thread::sleep(Duration::from_millis(800));
        r.respond(200, b"", "slow").unwrap();
    }))
    .unwrap();
    s.start().unwrap();
    let port = s.port(0).unwrap();
    // A thread takes its name when it first runs, which a loaded machine may delay.
    let t = Instant::now();
    while io_threads_cpu().len() < 2 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(io_threads_cpu().len(), 2, "auto dispatch with one worker runs it and a spare");

    // Fast handlers: one I/O thread does all the work, as inline dispatch would. Stock
    // tokio woke the spare for every batch of ready sockets and the two shared the load.
    let (spent, answered) = cpu_during(port);
    assert!(answered > 100, "{answered} answers");
    assert!(spent[1] * 4 < spent[0], "the spare worked beside the busy one (CPU ns {spent:?})");

    // A handler that blocks: the spare takes over the other connections meanwhile.
    let blocker = std::thread::spawn(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"GET /block HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    });
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    let during = load(port, 4, Duration::from_millis(300));
    assert!(during > 10, "{during} answers while a handler blocked, in {:?}", t.elapsed());
    assert!(blocker.join().unwrap().ends_with("slow"));

    // And once it is done, the spare goes back to sleep.
    std::thread::sleep(Duration::from_millis(50));
    let (spent, answered) = cpu_during(port);
    assert!(answered > 100, "{answered} answers");
    assert!(spent[1] * 4 < spent[0], "the spare kept working after the block (CPU ns {spent:?})");
}
