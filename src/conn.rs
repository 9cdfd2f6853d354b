//! One accepted connection: protocol detection, hyper, and a watchdog that closes the
//! gaps plain hyper leaves (a silent client held forever, no 408 on a slow header,
//! no idle keep-alive timeout).

use crate::server::Run;
use crate::service;
#[cfg(feature = "http2")]
use hyper_util::rt::TokioExecutor;
use hyper_util::rt::TokioIo;
use std::io;
use std::net::SocketAddr;
#[cfg(unix)]
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
#[cfg(windows)]
use std::os::windows::io::{AsRawSocket, BorrowedSocket, RawSocket};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const TIMEOUT_408: &[u8] = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

static EPOCH: once_cell::sync::Lazy<Instant> = once_cell::sync::Lazy::new(Instant::now);

fn now_ms() -> u64 {
    EPOCH.elapsed().as_millis() as u64 + 1
}

/// What the watchdog needs to know about a connection. The hot path only bumps
/// counters and flags; the watchdog reads the clock once per tick and turns changes it
/// sees into times, so no request pays for a clock read.
pub(crate) struct ConnState {
    pub remote: String,
    pub is_h2: AtomicBool,
    in_flight: AtomicU32,
    /// Bytes of a request head arrived and no request started from them yet.
    head_pending: AtomicBool,
    /// Bumped by every read with data and every request start and end.
    events: AtomicU64,
    /// Bumped by every request start.
    requests: AtomicU64,
    started: AtomicBool,
    /// The bytes read so far end where a request head ends (CRLF CRLF): nothing partial
    /// can be waiting behind them in hyper's buffer.
    at_boundary: AtomicBool,
}

impl ConnState {
    fn on_read(&self, n: usize) {
        if n > 0 {
            self.events.fetch_add(1, Relaxed);
            if self.in_flight.load(Relaxed) == 0 {
                self.head_pending.store(true, Relaxed);
            }
            self.started.store(true, Relaxed);
        }
    }

    /// Called when a request head is complete and handed to the service.
    pub fn request_started(self: &Arc<Self>, bodiless: bool) -> InFlight {
        self.in_flight.fetch_add(1, Relaxed);
        self.head_pending.store(false, Relaxed);
        self.requests.fetch_add(1, Relaxed);
        self.events.fetch_add(1, Relaxed);
        InFlight { conn: self.clone(), bodiless }
    }
}

/// Marks one request as being handled until dropped.
pub(crate) struct InFlight {
    conn: Arc<ConnState>,
    bodiless: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let c = &self.conn;
        c.events.fetch_add(1, Relaxed);
        // Bytes read with a bodiless request that do not end at a head boundary are the
        // start of a pipelined request: its header clock starts now.
        if self.bodiless && !c.at_boundary.load(Relaxed) {
            c.head_pending.store(true, Relaxed);
        }
        c.in_flight.fetch_sub(1, Relaxed);
    }
}

/// The watchdog's own view of time for one connection.
struct Clock {
    events: u64,
    requests: u64,
    last_activity: u64,
    head_since: Option<u64>,
}

/// The socket as hyper sees it, counting bytes and noting activity.
struct Watched {
    stream: TcpStream,
    state: Arc<ConnState>,
    run: Arc<Run>,
    /// The last four bytes read, across reads.
    tail: [u8; 4],
}

impl AsyncRead for Watched {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut this.stream).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = res {
            let n = buf.filled().len() - before;
            if n > 0 {
                let fresh = &buf.filled()[before..];
                let keep = 4usize.saturating_sub(fresh.len());
                let mut tail = [0u8; 4];
                tail[..keep].copy_from_slice(&this.tail[4 - keep..]);
                tail[keep..].copy_from_slice(&fresh[fresh.len() - (4 - keep)..]);
                this.tail = tail;
                this.state.at_boundary.store(&tail == b"\r\n\r\n" || tail[2..] == *b"\n\n", Relaxed);
            }
            this.state.on_read(n);
            this.run.counters.bytes_read.fetch_add(n as u64, Relaxed);
        }
        res
    }
}

impl AsyncWrite for Watched {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = res {
            this.run.counters.bytes_written.fetch_add(n as u64, Relaxed);
        }
        res
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = res {
            this.run.counters.bytes_written.fetch_add(n as u64, Relaxed);
        }
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// Serves one connection until it closes, the watchdog closes it, or the runtime stops.
pub(crate) async fn serve(stream: TcpStream, remote: SocketAddr, run: Arc<Run>, shutdown: watch::Receiver<bool>) {
    let state = Arc::new(ConnState {
        remote: remote.to_string(),
        is_h2: AtomicBool::new(false),
        in_flight: AtomicU32::new(0),
        head_pending: AtomicBool::new(false),
        events: AtomicU64::new(0),
        requests: AtomicU64::new(0),
        started: AtomicBool::new(false),
        at_boundary: AtomicBool::new(true),
    });
    let mut clock = Clock { events: 0, requests: 0, last_activity: now_ms(), head_since: None };
    #[cfg(unix)]
    let fd = stream.as_raw_fd();
    #[cfg(windows)]
    let fd = stream.as_raw_socket();
    let work = drive(stream, state.clone(), run.clone(), shutdown);
    tokio::pin!(work);
    let sleep = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(sleep);
    loop {
        match check(&state, &mut clock, &run.limits) {
            Verdict::Wait(ms) => {
                // State changes (a request ends, bytes arrive) do not wake the watchdog, so it
                // also looks again every `tick`.
                let ms = ms.min(tick(&run.limits));
                sleep.as_mut().reset(tokio::time::Instant::now() + Duration::from_millis(ms))
            }
            Verdict::Close => return,
            Verdict::Timeout408 => {
                send_raw(fd, TIMEOUT_408);
                run.counters.status(408);
                return;
            }
        }
        tokio::select! {
            _ = &mut work => return,
            _ = &mut sleep => {}
        }
    }
}

fn tick(limits: &crate::config::Limits) -> u64 {
    let shortest = [limits.header_timeout, limits.idle_timeout]
        .iter()
        .filter(|d| !d.is_zero())
        .map(|d| d.as_millis() as u64)
        .min()
        .unwrap_or(4000);
    (shortest / 4).clamp(25, 1000)
}

enum Verdict {
    Wait(u64),
    Close,
    Timeout408,
}

fn check(state: &ConnState, clock: &mut Clock, limits: &crate::config::Limits) -> Verdict {
    let (header_ms, idle_ms) = (limits.header_timeout.as_millis() as u64, limits.idle_timeout.as_millis() as u64);
    let now = now_ms();
    let events = state.events.load(Relaxed);
    if events != clock.events {
        clock.events = events;
        clock.last_activity = now;
    }
    let requests = state.requests.load(Relaxed);
    if requests != clock.requests {
        // A request started since the last look: any head seen pending then is done.
        clock.requests = requests;
        clock.head_since = None;
    }
    if state.in_flight.load(Relaxed) > 0 {
        clock.head_since = None;
        return Verdict::Wait(idle_ms.max(1000));
    }
    if state.head_pending.load(Relaxed) && header_ms > 0 && !state.is_h2.load(Relaxed) {
        let due = *clock.head_since.get_or_insert(now) + header_ms;
        return if now >= due { Verdict::Timeout408 } else { Verdict::Wait(due - now) };
    }
    clock.head_since = None;
    // A connection that never sent a byte gets the header timeout, not the idle one.
    let limit = if !state.started.load(Relaxed) && header_ms > 0 { header_ms } else { idle_ms };
    if limit == 0 {
        return Verdict::Wait(3_600_000);
    }
    let due = clock.last_activity + limit;
    if now >= due { Verdict::Close } else { Verdict::Wait(due - now) }
}

/// Writes a last word on a socket hyper still owns; the caller closes the connection
/// right after, so nothing interleaves with hyper's own writes. Unread input is drained
/// first: closing over it would send a reset that can destroy the answer in flight.
#[cfg(unix)]
fn send_raw(fd: RawFd, bytes: &[u8]) {
    // SAFETY: the stream owning fd is alive inside the pinned `work` future of the caller.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let sock = socket2::SockRef::from(&borrowed);
    let mut scratch = [0u8; 4096];
    for _ in 0..16 {
        // SAFETY: recv into a local buffer of the stated size.
        let n = unsafe { libc::recv(fd, scratch.as_mut_ptr().cast(), scratch.len(), libc::MSG_DONTWAIT) };
        if n <= 0 {
            break;
        }
    }
    let _ = sock.send(bytes);
    let _ = sock.shutdown(std::net::Shutdown::Write);
}

/// Windows has no MSG_DONTWAIT; tokio's sockets are non-blocking there too, so a plain
/// read drains what is buffered and stops at WouldBlock.
#[cfg(windows)]
fn send_raw(sock: RawSocket, bytes: &[u8]) {
    use std::io::Read;
    // SAFETY: the stream owning the socket is alive inside the pinned `work` future of the caller.
    let borrowed = unsafe { BorrowedSocket::borrow_raw(sock) };
    let sock = socket2::SockRef::from(&borrowed);
    let mut scratch = [0u8; 4096];
    for _ in 0..16 {
        match (&*sock).read(&mut scratch) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    let _ = sock.send(bytes);
    let _ = sock.shutdown(std::net::Shutdown::Write);
}

/// Waits for enough bytes to tell HTTP/2 prior knowledge from HTTP/1. None = closed.
async fn sniff(stream: &TcpStream, state: &ConnState) -> io::Result<Option<bool>> {
    let mut buf = [0u8; 24];
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        state.on_read(n);
        if buf[..n] != H2_PREFACE[..n] {
            return Ok(Some(false));
        }
        if n == H2_PREFACE.len() {
            return Ok(Some(true));
        }
        // Only a client that sent part of the preface gets here; peek would spin.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn drive(stream: TcpStream, state: Arc<ConnState>, run: Arc<Run>, mut shutdown: watch::Receiver<bool>) {
    let is_h2 = match sniff(&stream, &state).await {
        Ok(Some(h2)) => h2,
        _ => return,
    };
    state.is_h2.store(is_h2, Relaxed);
    let io = TokioIo::new(Watched { stream, state: state.clone(), run: run.clone(), tail: [0; 4] });
    let svc = {
        let (run, state) = (run.clone(), state.clone());
        hyper::service::service_fn(move |req| service::handle(run.clone(), state.clone(), req))
    };
    #[cfg(not(feature = "http2"))]
    if is_h2 {
        // Built without HTTP/2 (the minimal library): a prior-knowledge client is closed.
        return;
    }
    #[cfg(feature = "http2")]
    if is_h2 {
        let conn = run.http2.serve_connection(io, svc);
        tokio::pin!(conn);
        until_done(conn.as_mut(), &mut shutdown, |c| c.graceful_shutdown()).await;
        return;
    }
    let conn = run.http1.serve_connection(io, svc);
    tokio::pin!(conn);
    until_done(conn.as_mut(), &mut shutdown, |c| c.graceful_shutdown()).await;
}

/// Polls a connection to the end, asking it to finish gracefully when the server stops.
async fn until_done<F: std::future::Future>(mut conn: Pin<&mut F>, shutdown: &mut watch::Receiver<bool>, graceful: impl Fn(Pin<&mut F>)) {
    if *shutdown.borrow() {
        graceful(conn.as_mut());
    } else {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = shutdown.changed() => graceful(conn.as_mut()),
        }
    }
    conn.await;
}

#[cfg(feature = "http2")]
pub(crate) fn http2_builder() -> hyper::server::conn::http2::Builder<TokioExecutor> {
    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
}
