//! The soak's load client (issue 12 item 5) for `bench/soak/soak.py`: Python clients top out at
//! a few thousand requests per second on two cores, so 10 million requests took most of an
//! hour per host; this one sends the same mix from one thread at tens of thousands.
//!
//! Usage: bench-soak HOST:PORT CONNS SEED [REQUESTS]
//!   CONNS keep-alive connections, each a task sending soak.py's mix in a loop (its own
//!   generator, seeded from SEED and its index) and checking every answer: status and body.
//!   Stops after REQUESTS requests in all (0 or missing: no bound) or when stdin closes,
//!   each connection finishing the request it is in. Every ~200 ms it prints
//!   `progress REQUESTS UNEXPECTED`; at the end one JSON line
//!   `{"requests": N, "unexpected": M, "unexpected_first": [...]}` (the first 10 descriptions).
//!
//! The mix (soak.py's `one`, kind = one of 8 with equal odds): GET /, GET /users/u<n>,
//! POST /echo of 0, 1, 100, 4096 or 65536 random bytes, GET /inspect?x=<n>, GET /fail (500),
//! GET /slow?ms=5, GET /no/such/path (404), and a POST /echo that declares 1 MiB + 1 and sends
//! nothing (413, the engine closes). Every 20th request (on average) carries
//! `Connection: close`, and the client opens a new connection after it: keep-alive churn.
//!
//! HTTP/1.1 is written and parsed by hand: the engine's crate graph builds hyper's server side
//! only, and the client needs a request line, three headers and Content-Length / chunked
//! bodies. JSON answers are compared after dropping the whitespace outside strings, so the
//! hosts' different spacing is not an unexpected answer.

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const HELLO: &[u8] = br#"{"code": 1, "msg": "Hello WebAPI"}"#;
/// A socket operation that waits this long fails the request (soak.py's http.client timeout).
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Random bytes that /echo bodies are cut from (at a random offset per request).
const POOL_BYTES: usize = 1 << 20;
const BODY_SIZES: [usize; 5] = [0, 1, 100, 4096, 65536];
const OVER_LIMIT: u64 = 1_048_576 + 1;
const KEEP_ERRORS: usize = 10;

struct Shared {
    addr: String,
    limit: u64,
    issued: AtomicU64,
    done: AtomicU64,
    unexpected: AtomicU64,
    stop: AtomicBool,
    first: Mutex<Vec<String>>,
    pool: Vec<u8>,
}

/// xorshift64*: each connection's own generator; quality is plenty for picking a mix.
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) % n
    }
}

/// What the answer must be.
enum Want {
    Exact(&'static [u8]),
    /// Owned expected body (echo) as a range of the pool.
    Echo(usize, usize),
    /// JSON equal to this compact text once whitespace outside strings is dropped.
    Json(String),
    /// A JSON object whose compact text holds this member.
    JsonMember(&'static str),
    Any,
}

struct Answer {
    status: u16,
    body: Vec<u8>,
    close: bool,
}

type Io = BufReader<TcpStream>;

async fn timed<T>(what: &str, f: impl std::future::Future<Output = std::io::Result<T>>) -> Result<T, String> {
    match tokio::time::timeout(IO_TIMEOUT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: timed out after {} s", IO_TIMEOUT.as_secs())),
    }
}

async fn connect(addr: &str) -> Result<Io, String> {
    let tcp = timed("connect", TcpStream::connect(addr)).await?;
    tcp.set_nodelay(true).ok();
    Ok(BufReader::with_capacity(16384, tcp))
}

async fn read_line(io: &mut Io, line: &mut Vec<u8>) -> Result<(), String> {
    line.clear();
    let n = timed("read", io.read_until(b'\n', line)).await?;
    if n == 0 {
        return Err("connection closed before the answer was complete".into());
    }
    if line.len() > 16384 {
        return Err("answer line over 16 KiB".into());
    }
    Ok(())
}

async fn read_answer(io: &mut Io) -> Result<Answer, String> {
    let mut line = Vec::with_capacity(128);
    read_line(io, &mut line).await?;
    let status = std::str::from_utf8(&line)
        .ok()
        .filter(|l| l.starts_with("HTTP/1."))
        .and_then(|l| l.get(9..12))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("bad status line {:?}", String::from_utf8_lossy(&line)))?;
    // HTTP/1.0 closes unless it says keep-alive (no Ember answer is 1.0; a stray server's may be).
    let (mut length, mut chunked, mut close) = (None, false, line.starts_with(b"HTTP/1.0"));
    loop {
        read_line(io, &mut line).await?;
        if line == b"\r\n" || line == b"\n" {
            break;
        }
        let text = String::from_utf8_lossy(&line);
        let Some((name, value)) = text.split_once(':') else {
            return Err(format!("bad header line {text:?}"));
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = Some(value.parse::<usize>().map_err(|_| format!("bad length {value:?}"))?),
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            "connection" => {
                let v = value.to_ascii_lowercase();
                close = v.contains("close") || (close && !v.contains("keep-alive"));
            }
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            read_line(io, &mut line).await?;
            let text = String::from_utf8_lossy(&line);
            let size = text.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size, 16).map_err(|_| format!("bad chunk size {text:?}"))?;
            if size == 0 {
                // Trailers, if any, up to the empty line.
                loop {
                    read_line(io, &mut line).await?;
                    if line == b"\r\n" || line == b"\n" {
                        break;
                    }
                }
                break;
            }
            let at = body.len();
            body.resize(at + size, 0);
            timed("read", io.read_exact(&mut body[at..])).await?;
            read_line(io, &mut line).await?;
        }
    } else if let Some(n) = length {
        body.resize(n, 0);
        timed("read", io.read_exact(&mut body)).await?;
    } else if !(status == 204 || status == 304 || (100..200).contains(&status)) {
        // Delimited by the close.
        timed("read", io.read_to_end(&mut body)).await?;
        close = true;
    }
    Ok(Answer { status, body, close })
}

/// JSON text without the whitespace outside strings.
fn compact(json: &[u8]) -> Vec<u8> {
    let (mut out, mut in_str, mut esc) = (Vec::with_capacity(json.len()), false, false);
    for &b in json {
        if in_str {
            out.push(b);
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
        } else if !b.is_ascii_whitespace() {
            out.push(b);
            in_str = b == b'"';
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Writes one request of the mix; returns what its answer must be, and whether the
/// connection closes after it.
async fn send(sh: &Shared, io: &mut Io, rnd: &mut Rng, req: &mut Vec<u8>) -> Result<(u16, Want, bool, u64), String> {
    let kind = rnd.below(8);
    let close = rnd.below(20) == 0;
    req.clear();
    let conn = if close { "Connection: close\r\n" } else { "" };
    let host = &sh.addr;
    let mut body: &[u8] = &[];
    let (status, want) = match kind {
        0 => {
            req.extend_from_slice(format!("GET / HTTP/1.1\r\nHost: {host}\r\n{conn}\r\n").as_bytes());
            (200, Want::Exact(HELLO))
        }
        1 => {
            let uid = format!("u{}", rnd.below(1_000_000));
            req.extend_from_slice(format!("GET /users/{uid} HTTP/1.1\r\nHost: {host}\r\n{conn}\r\n").as_bytes());
            (200, Want::Json(format!(r#"{{"id":"{uid}"}}"#)))
        }
        2 => {
            let n = BODY_SIZES[rnd.below(BODY_SIZES.len() as u64) as usize];
            let at = rnd.below((POOL_BYTES - n + 1) as u64) as usize;
            body = &sh.pool[at..at + n];
            req.extend_from_slice(
                format!(
                    "POST /echo HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-soak\r\nContent-Length: {n}\r\n{conn}\r\n"
                )
                .as_bytes(),
            );
            (200, Want::Echo(at, n))
        }
        3 => {
            let x = rnd.below(100);
            req.extend_from_slice(format!("GET /inspect?x={x} HTTP/1.1\r\nHost: {host}\r\n{conn}\r\n").as_bytes());
            (200, Want::JsonMember(r#""path":"/inspect""#))
        }
        4 => {
            req.extend_from_slice(format!("GET /fail HTTP/1.1\r\nHost: {host}\r\n{conn}\r\n").as_bytes());
            (500, Want::Any)
        }
        5 => {
            req.extend_from_slice(format!("GET /slow?ms=5 HTTP/1.1\r\nHost: {host}\r\n{conn}\r\n").as_bytes());
            (200, Want::Json(r#"{"slept_ms":5}"#.into()))
        }
        6 => {
            req.extend_from_slice(format!("GET /no/such/path HTTP/1.1\r\nHost: {host}\r\n{conn}\r\n").as_bytes());
            (404, Want::Any)
        }
        _ => {
            // Declared over the limit and not sent: the engine answers 413 from the head (a
            // client still writing the body would race the close: EPIPE).
            req.extend_from_slice(
                format!("POST /echo HTTP/1.1\r\nHost: {host}\r\nContent-Length: {OVER_LIMIT}\r\n\r\n").as_bytes(),
            );
            (413, Want::Any)
        }
    };
    req.extend_from_slice(body);
    timed("write", io.get_mut().write_all(req)).await?;
    Ok((status, want, close || kind == 7, kind))
}

fn check(sh: &Shared, want: &Want, body: &[u8]) -> bool {
    match want {
        Want::Exact(b) => body == *b,
        Want::Echo(at, n) => body == &sh.pool[*at..*at + *n],
        Want::Json(s) => compact(body) == s.as_bytes(),
        Want::JsonMember(m) => {
            let c = compact(body);
            c.first() == Some(&b'{') && c.last() == Some(&b'}') && contains(&c, m.as_bytes())
        }
        Want::Any => true,
    }
}

fn record(sh: &Shared, what: String) {
    sh.unexpected.fetch_add(1, Ordering::Relaxed);
    let mut first = sh.first.lock().unwrap();
    if first.len() < KEEP_ERRORS {
        first.push(what);
    }
}

/// One connection's loop: a request, its answer checked, a new connection after a close.
async fn connection(sh: Arc<Shared>, seed: u64) {
    let mut rnd = Rng::new(seed);
    let mut req = Vec::with_capacity(70_000);
    let mut io: Option<Io> = None;
    let (mut used, mut last) = (0u64, Instant::now());
    loop {
        if sh.stop.load(Ordering::Relaxed) {
            break;
        }
        if sh.limit > 0 && sh.issued.fetch_add(1, Ordering::Relaxed) >= sh.limit {
            break;
        }
        let start = Instant::now();
        let result = async {
            if io.is_none() {
                io = Some(connect(&sh.addr).await?);
            }
            let c = io.as_mut().unwrap();
            let (status, want, close, kind) = send(&sh, c, &mut rnd, &mut req).await?;
            let a = read_answer(c).await?;
            if !(a.status == status && check(&sh, &want, &a.body)) {
                record(&sh, format!("kind {kind}: status {} (wanted {status}), body {:?}", a.status,
                                    String::from_utf8_lossy(&a.body[..a.body.len().min(120)])));
            }
            Ok::<_, String>(close || a.close)
        }
        .await;
        let closed = match result {
            Ok(closed) => closed,
            Err(e) => {
                // How long the connection sat idle before this request tells a server that
                // dropped a request from the keep-alive race (idle timeout) on a stalled client.
                record(&sh, format!(
                    "{e} after {:.1} s (request {} on its connection, idle {:.1} s before it)",
                    start.elapsed().as_secs_f64(), used + 1, start.duration_since(last).as_secs_f64()));
                true
            }
        };
        sh.done.fetch_add(1, Ordering::Relaxed);
        used += 1;
        last = Instant::now();
        if closed {
            io = None;
            used = 0;
        }
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: bench-soak HOST:PORT CONNS SEED [REQUESTS]");
        std::process::exit(2);
    }
    let conns: u64 = args[2].parse().expect("CONNS");
    let seed: u64 = args[3].parse().expect("SEED");
    let limit: u64 = args.get(4).map(|s| s.parse().expect("REQUESTS")).unwrap_or(0);
    let mut rnd = Rng::new(seed ^ 0x5EED);
    let pool = (0..POOL_BYTES).map(|_| rnd.below(256) as u8).collect();
    let sh = Arc::new(Shared {
        addr: args[1].clone(),
        limit,
        issued: AtomicU64::new(0),
        done: AtomicU64::new(0),
        unexpected: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        first: Mutex::new(Vec::new()),
        pool,
    });
    // Stdin closing (soak.py's stop, or soak.py gone) stops the run.
    let s = sh.clone();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut line = String::new();
        while stdin.lock().read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            line.clear();
        }
        s.stop.store(true, Ordering::Relaxed);
    });
    // One thread: the server under test gets the other core.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let tasks: Vec<_> = (0..conns).map(|i| tokio::spawn(connection(sh.clone(), seed * 1000 + i))).collect();
        let progress = {
            let sh = sh.clone();
            tokio::spawn(async move {
                loop {
                    println!("progress {} {}", sh.done.load(Ordering::Relaxed), sh.unexpected.load(Ordering::Relaxed));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
        };
        for t in tasks {
            t.await.ok();
        }
        progress.abort();
    });
    let first = sh.first.lock().unwrap();
    let quoted: Vec<String> = first.iter().map(|e| json_str(e)).collect();
    println!(
        "{{\"requests\": {}, \"unexpected\": {}, \"unexpected_first\": [{}]}}",
        sh.done.load(Ordering::Relaxed),
        sh.unexpected.load(Ordering::Relaxed),
        quoted.join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        Shared {
            addr: String::new(),
            limit: 0,
            issued: AtomicU64::new(0),
            done: AtomicU64::new(0),
            unexpected: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            first: Mutex::new(Vec::new()),
            pool: (0..=255).collect(),
        }
    }

    #[test]
    fn json_spacing_does_not_matter_but_content_does() {
        let sh = shared();
        let want = Want::Json(r#"{"id":"u 7"}"#.into());
        assert!(check(&sh, &want, br#"{"id": "u 7"}"#));
        assert!(check(&sh, &want, b"{ \"id\" :\n\"u 7\" }"));
        assert!(!check(&sh, &want, br#"{"id": "u7"}"#));
        assert!(!check(&sh, &want, br#"{"id": "u 7", "x": 1}"#));
        let inspect = Want::JsonMember(r#""path":"/inspect""#);
        assert!(check(&sh, &inspect, br#"{"method": "GET", "path": "/inspect", "query": "x=1"}"#));
        assert!(!check(&sh, &inspect, br#"{"method": "GET", "path": "/inspect2"}"#));
    }

    #[test]
    fn echo_must_be_the_same_bytes() {
        let sh = shared();
        assert!(check(&sh, &Want::Echo(10, 3), &[10, 11, 12]));
        assert!(!check(&sh, &Want::Echo(10, 3), &[10, 11, 13]));
        assert!(!check(&sh, &Want::Echo(10, 3), &[10, 11]));
        assert!(check(&sh, &Want::Exact(HELLO), HELLO));
        assert!(!check(&sh, &Want::Exact(HELLO), b""));
    }
}
