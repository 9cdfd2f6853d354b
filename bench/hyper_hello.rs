//! Bare tokio + hyper 1.x hello server: the ceiling Ember's numbers are compared against.
//!
//! Usage: `bench-hyper [port] [workers]` (port 0 picks a free port; workers 0 = one per core).
//! Prints `listening on http://127.0.0.1:PORT` as its first stdout line, then answers every
//! request with `{"code": 1, "msg": "Hello WebAPI"}` as `application/json`, HTTP/1.1 with
//! keep-alive and TCP_NODELAY. It stops on SIGINT/SIGTERM (default signal action).
//! `GET /stream?n=N&size=S` streams N chunks of S bytes (chunked), each a fresh buffer as the
//! reference apps' `/stream` writes: the ceiling of the streaming bench (`bench/ws_bench.py`).

use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Request, Response};
use http_body_util::{Either, Full, StreamBody};
use hyper::body::Frame;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

const BODY: &[u8] = br#"{"code": 1, "msg": "Hello WebAPI"}"#;

type Body = Either<Full<Bytes>, StreamBody<futures_util::stream::Iter<Chunks>>>;

/// The chunks of a `/stream` answer, made one at a time as hyper asks for them (as a
/// streaming host writes them), never all at once.
struct Chunks {
    next: usize,
    n: usize,
    size: usize,
}

impl Iterator for Chunks {
    type Item = Result<Frame<Bytes>, Infallible>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.next == self.n {
            return None;
        }
        let fill = b'a' + (self.next % 26) as u8;
        self.next += 1;
        Some(Ok(Frame::data(Bytes::from(vec![fill; self.size]))))
    }
}

async fn hello(req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    if req.uri().path() == "/stream" {
        return Ok(stream(req.uri().query().unwrap_or("")));
    }
    let mut resp = Response::new(Either::Left(Full::new(Bytes::from_static(BODY))));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(resp)
}

fn stream(query: &str) -> Response<Body> {
    let (mut n, mut size) = (0usize, 1usize);
    for kv in query.split('&') {
        match kv.split_once('=') {
            Some(("n", v)) => n = v.parse().unwrap_or(0),
            Some(("size", v)) => size = v.parse().unwrap_or(1),
            _ => {}
        }
    }
    let body = StreamBody::new(futures_util::stream::iter(Chunks { next: 0, n, size }));
    let mut resp = Response::new(Either::Right(body));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    resp
}

fn arg(n: usize, default: usize) -> usize {
    match std::env::args().nth(n) {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("usage: bench-hyper [port] [workers]  (bad argument {s:?})");
            std::process::exit(2)
        }),
    }
}

fn main() {
    let port = arg(1, 8080);
    if port > u16::MAX as usize {
        eprintln!("port out of range: {port}");
        std::process::exit(2);
    }
    let workers = match arg(2, 0) {
        0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        n => n,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(serve(port as u16));
}

async fn serve(port: u16) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let listener = match TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("bind {addr}: {e}");
            std::process::exit(1);
        }
    };
    let local = listener.local_addr().expect("local_addr");
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on http://127.0.0.1:{}", local.port());
        let _ = out.flush();
    }
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                eprintln!("accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let conn = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service_fn(hello));
            let _ = conn.await;
        });
    }
}
