//! One WebSocket connection: its state as the host sees it (queue, groups, handle) and
//! the task that reads frames through tungstenite and writes the queue.

use super::{Hub, Kind, WsRoute, TABLE};
use crate::connstate::ConnState;
use crate::dispatch::Mailbox;
use crate::error::{Error, ErrorKind, Result};
use crate::registry;
use crate::request::Answer;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::{watch, Notify};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

/// How long a closing handshake may take before the connection is cut.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// A failed connection's peer may go on sending (the rest of an oversize message) while
/// bytes keep arriving at least this often (nginx's `lingering_timeout` idea): a slow but
/// steady sender (a 16 MiB frame through Wine's sockets on a loaded machine took longer than a
/// fixed 2 s) still reads our close frame instead of a reset.
const LINGER_IDLE: Duration = Duration::from_secs(2);
/// ... and for at most this long in all, so a peer that never stops cannot hold the socket.
const LINGER_MAX: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The open callback has the upgrade request; no answer yet.
    Opening,
    /// Accepted: sends are queued, and written once the upgrade completes.
    Open,
    /// Ended; the close callback was (or is being) posted.
    Closed,
}

#[derive(Default)]
struct Out {
    queue: VecDeque<Bytes>,
    queued: usize,
    /// The host asked to close with this code and reason.
    close: Option<(u16, String)>,
    /// A send was refused: `on_writable` is due once the queue drains to half.
    refused: bool,
}

pub(crate) struct WsConn {
    pub id: u64,
    pub server_id: u64,
    request: u64,
    route: Arc<WsRoute>,
    hub: Arc<Hub>,
    mailbox: Arc<Mailbox>,
    phase: Mutex<Phase>,
    out: Mutex<Out>,
    /// Wakes the connection task: something to write, or a close to start.
    wake: Notify,
    /// Bytes of messages handed to the mailbox and not yet delivered to the host; the
    /// reader waits while this is over the limit.
    inbound: AtomicUsize,
    drained: Notify,
    limit: usize,
    pub(crate) groups: Mutex<Vec<String>>,
}

impl WsConn {
    /// A connection for an upgrade request that the open callback is about to see.
    pub fn open(server_id: u64, request: u64, route: Arc<WsRoute>, hub: Arc<Hub>, mailbox: Arc<Mailbox>, limit: usize) -> Arc<WsConn> {
        let mut made = None;
        TABLE.insert(|id| {
            let conn = Arc::new(WsConn {
                id,
                server_id,
                request,
                route,
                hub,
                mailbox,
                phase: Mutex::new(Phase::Opening),
                out: Mutex::default(),
                wake: Notify::new(),
                inbound: AtomicUsize::new(0),
                drained: Notify::new(),
                limit: limit.max(1),
                groups: Mutex::default(),
            });
            made = Some(conn.clone());
            conn
        });
        made.expect("insert calls its maker")
    }

    pub fn hub(&self) -> &Hub {
        &self.hub
    }


    pub fn route(&self) -> &Arc<WsRoute> {
        &self.route
    }

    /// The host's accept: the upgrade request is answered 101 with `headers` on top.
    pub fn accept(self: &Arc<Self>, headers: &[u8]) -> Result<()> {
        let headers = crate::response::parse_header_block(headers)?;
        let mut phase = self.phase.lock();
        if *phase != Phase::Opening {
            return Err(Error::new(ErrorKind::AlreadyAnswered, format!("WebSocket {:#x} was already accepted", self.id)));
        }
        let claim = registry::claim(self.request)?;
        *phase = Phase::Open;
        drop(phase);
        self.route.open.fetch_add(1, Ordering::Relaxed);
        if let Some(pattern) = self.route.pattern.get() {
            self.hub.join(self, pattern);
        }
        claim.send(Answer::new(101, headers, Bytes::new()))
    }

    /// Queues an encoded frame. Taken while the queue is under its limit.
    pub fn send(&self, frame: Bytes) -> Result<()> {
        match *self.phase.lock() {
            Phase::Open => {}
            Phase::Opening => return Err(Error::new(ErrorKind::State, format!("WebSocket {:#x} is not accepted yet", self.id))),
            Phase::Closed => return Err(Error::new(ErrorKind::ClientGone, format!("WebSocket {:#x} is closed", self.id))),
        }
        let mut out = self.out.lock();
        if out.close.is_some() {
            return Err(Error::new(ErrorKind::ClientGone, format!("WebSocket {:#x} is closing", self.id)));
        }
        if out.queued >= self.limit {
            out.refused = true;
            return Err(Error::new(ErrorKind::WouldBlock, format!("WebSocket {:#x}: {} bytes already queued", self.id, out.queued)));
        }
        out.queued += frame.len();
        out.queue.push_back(frame);
        drop(out);
        self.wake.notify_one();
        Ok(())
    }

    pub fn close(&self, code: u16, reason: &str) {
        let mut out = self.out.lock();
        if out.close.is_none() {
            out.close = Some((code, reason.to_owned()));
        }
        drop(out);
        self.wake.notify_one();
    }

    pub fn queued(&self) -> usize {
        self.out.lock().queued
    }

    /// The upgrade request was answered without an accept (refused, timed out, client
    /// gone): the handle ends quietly; the host knows from its answer.
    pub fn abandon(&self) {
        let mut phase = self.phase.lock();
        if *phase == Phase::Opening {
            *phase = Phase::Closed;
            drop(phase);
            TABLE.remove(self.id);
        }
    }

    /// Ends an accepted connection, once: it leaves its groups and the table, and the
    /// host hears the close after every message already queued for it.
    pub(crate) fn finish(self: &Arc<Self>, code: u16, reason: String) {
        {
            let mut phase = self.phase.lock();
            if *phase == Phase::Closed {
                return;
            }
            *phase = Phase::Closed;
        }
        TABLE.remove(self.id);
        self.hub.remove(self);
        self.route.open.fetch_sub(1, Ordering::Relaxed);
        let (route, id) = (self.route.clone(), self.id);
        self.mailbox.post(Box::new(move || (route.on_close)(id, code, &reason)));
    }

    fn deliver(self: &Arc<Self>, kind: Kind, data: Bytes) {
        let len = data.len();
        self.inbound.fetch_add(len, Ordering::AcqRel);
        let conn = self.clone();
        self.mailbox.post(Box::new(move || {
            (conn.route.on_message)(conn.id, kind, &data);
            let before = conn.inbound.fetch_sub(len, Ordering::AcqRel);
            if before > conn.limit && before - len <= conn.limit {
                conn.drained.notify_one();
            }
        }));
    }

    /// Takes everything queued. The bytes stay counted in `queued` until written, so
    /// `buffered` tells the host what has not reached the socket and a writer stuck on
    /// a slow reader holds at most the limit, not the limit twice over.
    fn take_queue(&self) -> VecDeque<Bytes> {
        std::mem::take(&mut self.out.lock().queue)
    }

    /// `n` bytes reached the socket; true if the host was refused and should now hear
    /// `on_writable`.
    fn written(&self, n: usize) -> bool {
        let mut out = self.out.lock();
        out.queued -= n.min(out.queued);
        out.queued < self.limit && std::mem::take(&mut out.refused)
    }

    /// The host's close, once every frame queued before it has been taken: checked
    /// under the same lock as the queue, else a frame queued between the writer's last
    /// take and this look would be dropped behind the close frame.
    fn close_request(&self) -> Option<(u16, String)> {
        let out = self.out.lock();
        if out.queue.is_empty() {
            out.close.clone()
        } else {
            None
        }
    }
}

/// Limits of a connection's reading side.
#[derive(Clone, Copy)]
pub(crate) struct WsLimits {
    pub max_message: usize,
    pub ping_interval: Duration,
    /// No write progress for this long cuts the connection.
    pub stall: Duration,
}

/// The connection task: waits for the upgrade, then reads and writes until the end.
pub(crate) async fn run(conn: Arc<WsConn>, upgrade: OnUpgrade, limits: WsLimits, mut shutdown: watch::Receiver<bool>, state: Arc<ConnState>) {
    let _finally = FinishOnDrop { conn: conn.clone(), stopping: shutdown.clone() };
    let io = match upgrade.await {
        Ok(io) => io,
        Err(_) => return conn.finish(1006, "the upgrade did not complete".into()),
    };
    state.upgraded.store(true, Ordering::Relaxed);
    let config = WebSocketConfig::default()
        // Small to start: an idle connection should cost a few KiB, not tungstenite's
        // 128 KiB default; larger frames grow the buffer as they arrive.
        .read_buffer_size(2048)
        .write_buffer_size(0)
        .max_message_size(Some(limits.max_message))
        .max_frame_size(Some(limits.max_message));
    let mut ws = WebSocketStream::from_raw_socket(TokioIo::new(io), Role::Server, Some(config)).await;
    let mut failed = false;
    let (code, reason) = session(&conn, &mut ws, limits, &mut shutdown, &state, &mut failed).await;
    conn.finish(code, reason);
    if failed {
        // Boxed: the task of every connection is as large as its largest await, and
        // this rare one would add its buffer to each of 10,000 idle connections.
        Box::pin(linger(ws.get_mut(), &mut shutdown)).await;
    }
}

/// A connection task dropped before it finished (stop's timeout drops the runtime, and
/// with it every task still waiting for a closing handshake): the host still hears
/// `on_close` exactly once, and the handle leaves the table (which lets go of the route).
struct FinishOnDrop {
    conn: Arc<WsConn>,
    stopping: watch::Receiver<bool>,
}

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        let (code, reason) = if *self.stopping.borrow() { (1001, "server stopping") } else { (1006, "") };
        self.conn.finish(code, reason.into());
    }
}

/// After failing a connection (1002, 1007, 1009) while the peer may still be sending (the
/// rest of an oversize message): dropping the socket with unread bytes makes the kernel
/// send a reset, the peer's next write fails, and clients then never read our close frame.
/// So: send FIN, then read and drop what still comes until the peer closes, for a while.
async fn linger(io: &mut TokioIo<hyper::upgrade::Upgraded>, shutdown: &mut watch::Receiver<bool>) {
    use tokio::io::AsyncReadExt;
    let _ = io.shutdown().await;
    let mut sink = vec![0u8; 16 * 1024];
    let drain = async {
        while let Ok(Ok(n)) = tokio::time::timeout(LINGER_IDLE, io.read(&mut sink)).await {
            if n == 0 {
                break;
            }
        }
    };
    tokio::select! {
        _ = tokio::time::timeout(LINGER_MAX, drain) => {}
        _ = shutdown.changed() => {}
    }
}

type Ws = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

async fn session(
    conn: &Arc<WsConn>,
    ws: &mut Ws,
    limits: WsLimits,
    shutdown: &mut watch::Receiver<bool>,
    state: &ConnState,
    failed: &mut bool,
) -> (u16, String) {
    let ping_every = (!limits.ping_interval.is_zero()).then_some(limits.ping_interval);
    let ping = tokio::time::sleep(ping_every.unwrap_or(Duration::from_secs(3600)));
    tokio::pin!(ping);
    let mut awaiting_pong = false;
    // Set once our close frame is out: (code we sent, reason), and the deadline.
    let mut closing: Option<(u16, String)> = None;
    let close_timer = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(close_timer);
    loop {
        if let Err(cut) = write_queue(conn, ws, limits.stall, state).await {
            return cut;
        }
        if closing.is_none() {
            if let Some((code, reason)) = conn.close_request() {
                if send_close(ws, code, &reason).await.is_err() {
                    return (1006, String::new());
                }
                close_timer.as_mut().reset(tokio::time::Instant::now() + CLOSE_GRACE);
                closing = Some((code, reason));
            }
        }
        // A reader over its limit of undelivered messages waits for the host.
        while conn.inbound.load(Ordering::Acquire) > conn.limit {
            tokio::select! {
                _ = conn.drained.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        tokio::select! {
            _ = shutdown.changed(), if closing.is_none() => conn.close(1001, "server stopping"),
            _ = &mut close_timer, if closing.is_some() => return closing.unwrap_or((1006, String::new())),
            _ = conn.wake.notified() => {}
            _ = &mut ping, if ping_every.is_some() => {
                if awaiting_pong {
                    return (1006, "no answer to ping".into());
                }
                awaiting_pong = true;
                if ws.send(Message::Ping(Bytes::from_static(b"ember"))).await.is_err() {
                    return (1006, String::new());
                }
                ping.as_mut().reset(tokio::time::Instant::now() + limits.ping_interval);
            }
            next = ws.next() => {
                awaiting_pong = false;
                if let Some(every) = ping_every {
                    ping.as_mut().reset(tokio::time::Instant::now() + every);
                }
                match next {
                    Some(Ok(Message::Text(t))) => conn.deliver(Kind::Text, Bytes::from(t)),
                    Some(Ok(Message::Binary(b))) => conn.deliver(Kind::Binary, b),
                    // tungstenite queued the pong; the next write flushes it.
                    Some(Ok(Message::Ping(_))) => { let _ = ws.flush().await; }
                    Some(Ok(Message::Pong(_))) | Some(Ok(Message::Frame(_))) => {}
                    Some(Ok(Message::Close(frame))) => {
                        // Messages that came before the close may still be with the host;
                        // what it sends for them goes out before our answer to the close
                        // (RFC 6455 §5.5.1 lets the answer wait for them).
                        if closing.is_none() && settle(conn, ws, limits.stall, state).await.is_err() {
                            return (1006, String::new());
                        }
                        // tungstenite answers the close; send it before going.
                        let _ = ws.flush().await;
                        let (code, reason) = match frame {
                            Some(f) => (u16::from(f.code), f.reason.to_string()),
                            None => (1005, String::new()),
                        };
                        return closing.map(|(c, r)| if code == 1005 { (c, r) } else { (code, reason.clone()) }).unwrap_or((code, reason));
                    }
                    Some(Err(e)) => {
                        *failed = true;
                        return fail(ws, e).await;
                    }
                    None => return closing.unwrap_or((1006, String::new())),
                }
            }
        }
    }
}

/// A broken frame or message: tell the peer why (RFC 6455 §7.4.1), then go.
async fn fail(ws: &mut Ws, e: WsError) -> (u16, String) {
    let code = match &e {
        WsError::Capacity(_) => 1009,
        WsError::Utf8(_) => 1007,
        WsError::Protocol(tungstenite::error::ProtocolError::ResetWithoutClosingHandshake) => return (1006, String::new()),
        WsError::Protocol(_) => 1002,
        _ => return (1006, String::new()),
    };
    let reason = match &e {
        WsError::Capacity(_) => "message too big".to_owned(),
        WsError::Utf8(_) => "invalid UTF-8 in a text message".to_owned(),
        other => other.to_string().chars().take(100).collect(),
    };
    let _ = tokio::time::timeout(CLOSE_GRACE, send_close(ws, code, &reason)).await;
    (code, reason)
}

async fn send_close(ws: &mut Ws, code: u16, reason: &str) -> std::result::Result<(), WsError> {
    let frame = CloseFrame { code: CloseCode::from(code), reason: reason.to_owned().into() };
    ws.close(Some(frame)).await
}

/// The peer sent a close: waits (at most `CLOSE_GRACE`) until the host has seen every
/// message delivered before it, then writes what the host queued, ahead of tungstenite's
/// pending answer to the close.
async fn settle(conn: &Arc<WsConn>, ws: &mut Ws, stall: Duration, state: &ConnState) -> std::result::Result<(), (u16, String)> {
    let deadline = tokio::time::Instant::now() + CLOSE_GRACE;
    while conn.inbound.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
        tokio::select! {
            _ = conn.wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
    }
    write_frames(conn, ws, stall, state, false).await
}

/// Writes every queued frame straight to the socket, after anything tungstenite has
/// pending (pongs). A peer that takes no bytes for `stall` is cut.
async fn write_queue(conn: &Arc<WsConn>, ws: &mut Ws, stall: Duration, state: &ConnState) -> std::result::Result<(), (u16, String)> {
    write_frames(conn, ws, stall, state, true).await
}

/// Writes the host's queue; with `flush_first`, after what tungstenite has pending.
async fn write_frames(conn: &Arc<WsConn>, ws: &mut Ws, stall: Duration, state: &ConnState, flush_first: bool) -> std::result::Result<(), (u16, String)> {
    let queue = conn.take_queue();
    if queue.is_empty() {
        return Ok(());
    }
    let total: usize = queue.iter().map(|f| f.len()).sum();
    let cut = || (1006, "the peer stopped reading".to_owned());
    if flush_first && ws.flush().await.is_err() {
        return Err(cut());
    }
    for frame in queue {
        let io = ws.get_mut();
        let write = io.write_all(&frame);
        tokio::pin!(write);
        let mut seen = state.events.load(Ordering::Relaxed);
        loop {
            tokio::select! {
                r = &mut write => {
                    if r.is_err() { return Err(cut()); }
                    break;
                }
                _ = tokio::time::sleep(stall) => {
                    let now = state.events.load(Ordering::Relaxed);
                    if now == seen { return Err(cut()); }
                    seen = now;
                }
            }
        }
    }
    if ws.get_mut().flush().await.is_err() {
        return Err(cut());
    }
    if conn.written(total) {
        if let Some(cb) = conn.route.on_writable.clone() {
            let id = conn.id;
            conn.mailbox.post(Box::new(move || cb(id)));
        }
    }
    Ok(())
}
