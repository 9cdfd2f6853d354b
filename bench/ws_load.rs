//! WebSocket load client for `bench/ws_bench.py` (Python clients cannot hold 10,000
//! connections or time 1,000 echoing ones without measuring themselves).
//!
//! Usage:
//!   bench-ws hold HOST:PORT PATH N
//!       Opens N connections (at most 64 handshakes at a time), prints `open N MS`, then obeys
//!       stdin lines: `broadcast` (the first connection sends one 100-byte text message, then
//!       every connection waits for one message: prints `received COUNT MS`), `close` (every
//!       connection sends a close frame and waits for the server's: prints `closed COUNT MS`).
//!   bench-ws echo HOST:PORT PATH CONNS SECONDS SIZE
//!       CONNS connections each send a SIZE-byte binary message and wait for its echo, in a
//!       loop, for SECONDS; prints one JSON line with the round trips and their percentiles.
//! Every wait is bounded; a failure prints `error ...` to stderr and exits 1.

use std::io::BufRead;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

type Ws = WebSocketStream<TcpStream>;

fn die(msg: String) -> ! {
    eprintln!("error {msg}");
    std::process::exit(1)
}

/// The client handshake by hand: the engine's crate graph builds tungstenite's handshake
/// for the server side only, and the request is four lines.
async fn connect(addr: &str, path: &str) -> Result<Ws, String> {
    let mut tcp = TcpStream::connect(addr).await.map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_nodelay(true).ok();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    tcp.write_all(req.as_bytes()).await.map_err(|e| format!("write: {e}"))?;
    // Read the answer head byte by byte so nothing of the first frame is swallowed.
    let mut head = Vec::with_capacity(256);
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 8192 {
            return Err("answer head over 8 KiB".into());
        }
        let b = tcp.read_u8().await.map_err(|e| format!("read head: {e}"))?;
        head.push(b);
    }
    if !head.starts_with(b"HTTP/1.1 101") {
        return Err(format!("no 101: {}", String::from_utf8_lossy(&head[..head.len().min(80)])));
    }
    let config = WebSocketConfig::default().read_buffer_size(4096).write_buffer_size(0);
    Ok(WebSocketStream::from_raw_socket(tcp, Role::Client, Some(config)).await)
}

async fn next_data(ws: &mut Ws, limit: Duration) -> Result<(), String> {
    loop {
        match tokio::time::timeout(limit, ws.next()).await {
            Err(_) => return Err("no message in time".into()),
            Ok(None) => return Err("connection ended".into()),
            Ok(Some(Err(e))) => return Err(format!("read: {e}")),
            Ok(Some(Ok(Message::Text(_) | Message::Binary(_)))) => return Ok(()),
            Ok(Some(Ok(_))) => continue,
        }
    }
}

async fn hold(addr: String, path: String, n: usize) {
    let start = Instant::now();
    let gate = std::sync::Arc::new(Semaphore::new(64));
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let (addr, path, gate) = (addr.clone(), path.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire().await.unwrap();
            connect(&addr, &path).await
        }));
    }
    let mut conns = Vec::with_capacity(n);
    for t in tasks {
        match t.await.unwrap() {
            Ok(ws) => conns.push(ws),
            Err(e) => die(e),
        }
    }
    println!("open {} {}", conns.len(), start.elapsed().as_millis());

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line.trim().to_owned()).is_err() {
                break;
            }
        }
    });
    while let Some(cmd) = rx.recv().await {
        match cmd.as_str() {
            "broadcast" => {
                let start = Instant::now();
                if let Err(e) = conns[0].send(Message::text("x".repeat(100))).await {
                    die(format!("send: {e}"));
                }
                let mut waits = Vec::with_capacity(conns.len());
                for mut ws in conns.drain(..) {
                    waits.push(tokio::spawn(async move {
                        let r = next_data(&mut ws, Duration::from_secs(60)).await;
                        (ws, r)
                    }));
                }
                let mut got = 0;
                for w in waits {
                    let (ws, r) = w.await.unwrap();
                    got += r.is_ok() as usize;
                    conns.push(ws);
                }
                println!("received {got} {}", start.elapsed().as_millis());
            }
            "close" => {
                let start = Instant::now();
                let mut waits = Vec::with_capacity(conns.len());
                for mut ws in conns.drain(..) {
                    waits.push(tokio::spawn(async move {
                        let _ = ws.close(None).await;
                        // The server's close frame, then the end.
                        tokio::time::timeout(Duration::from_secs(10), async { while let Some(Ok(_)) = ws.next().await {} })
                            .await
                            .is_ok()
                    }));
                }
                let mut closed = 0;
                for w in waits {
                    closed += w.await.unwrap() as usize;
                }
                println!("closed {closed} {}", start.elapsed().as_millis());
            }
            "" => {}
            other => eprintln!("unknown command {other:?}"),
        }
    }
}

async fn echo(addr: String, path: String, conns: usize, seconds: u64, size: usize) {
    let gate = std::sync::Arc::new(Semaphore::new(64));
    let mut opened = Vec::with_capacity(conns);
    for _ in 0..conns {
        let (addr, path, gate) = (addr.clone(), path.clone(), gate.clone());
        opened.push(tokio::spawn(async move {
            let _permit = gate.acquire().await.unwrap();
            connect(&addr, &path).await
        }));
    }
    let mut socks = Vec::with_capacity(conns);
    for t in opened {
        socks.push(t.await.unwrap().unwrap_or_else(|e| die(e)));
    }
    let payload = vec![b'e'; size];
    let start = Instant::now();
    let until = start + Duration::from_secs(seconds);
    let mut runs = Vec::with_capacity(conns);
    for mut ws in socks {
        let payload = payload.clone();
        runs.push(tokio::spawn(async move {
            let mut lat: Vec<u32> = Vec::new();
            let mut errors = 0usize;
            while Instant::now() < until {
                let t = Instant::now();
                if ws.send(Message::binary(payload.clone())).await.is_err() {
                    errors += 1;
                    break;
                }
                match next_data(&mut ws, Duration::from_secs(10)).await {
                    Ok(()) => lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32),
                    Err(_) => {
                        errors += 1;
                        break;
                    }
                }
            }
            let _ = ws.close(None).await;
            (lat, errors)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for r in runs {
        let (lat, e) = r.await.unwrap();
        all.extend(lat);
        errors += e;
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1))).copied().unwrap_or(0);
    println!(
        "{{\"conns\": {conns}, \"size\": {size}, \"round_trips\": {}, \"per_s\": {:.0}, \"p50_us\": {}, \"p90_us\": {}, \"p99_us\": {}, \"max_us\": {}, \"errors\": {errors}}}",
        all.len(),
        all.len() as f64 / elapsed,
        pct(0.5),
        pct(0.9),
        pct(0.99),
        all.last().copied().unwrap_or(0)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |i: usize| -> usize {
        args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| die(format!("argument {i} must be a number")))
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match args.get(1).map(String::as_str) {
        Some("hold") if args.len() == 5 => rt.block_on(hold(args[2].clone(), args[3].clone(), num(4))),
        Some("echo") if args.len() == 7 => {
            rt.block_on(echo(args[2].clone(), args[3].clone(), num(4), num(5) as u64, num(6)))
        }
        _ => die("usage: bench-ws hold HOST:PORT PATH N | echo HOST:PORT PATH CONNS SECONDS SIZE".into()),
    }
}
