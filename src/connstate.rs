//! What one connection knows about itself, shared by the connection driver, its
//! watchdog and the request path. The hot path only bumps counters and flags; the
//! watchdog reads the clock once per tick and turns the changes it sees into times, so
//! no request pays for a clock read.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

pub(crate) struct ConnState {
    /// The client: the TCP peer, or the address a trusted PROXY header named.
    pub remote: String,
    /// The TCP peer as connected.
    pub peer: std::net::SocketAddr,
    pub peer_text: String,
    /// "http" or "https" (TLS listeners).
    pub scheme: &'static str,
    /// Came through a TLS listener.
    pub secure: bool,
    pub is_h2: AtomicBool,
    /// Requests started whose answer hyper has not finished taking (the guard lives in
    /// the response body, so a long answer still being written counts).
    pub(crate) in_flight: AtomicU32,
    /// Bytes of a request head arrived and no request started from them yet.
    pub(crate) head_pending: AtomicBool,
    /// Bumped by every read or write that moved bytes and by every request start and end.
    pub(crate) events: AtomicU64,
    /// Bumped by every request start.
    pub(crate) requests: AtomicU64,
    pub(crate) started: AtomicBool,
    /// The bytes read so far end where a request head ends (CRLF CRLF): nothing partial
    /// can be waiting behind them in hyper's buffer.
    pub(crate) at_boundary: AtomicBool,
    /// The last write found the socket full: the peer is not reading what we send.
    pub(crate) write_blocked: AtomicBool,
    /// Taken over by a WebSocket: reads and writes are frames, not requests and answers.
    pub(crate) upgraded: AtomicBool,
    /// HTTP/2: streams whose answer head went out and whose end has not (seen in the
    /// frames written and read), answer bodies that wait for the host with nothing to
    /// send, and DATA frames written. More streams open than idle bodies means answer
    /// bytes wait for the peer's flow-control window; a peer that never opens it while
    /// staying busy otherwise (PINGs) is cut like a peer that does not read.
    pub(crate) h2_sending: AtomicU32,
    pub(crate) h2_idle_bodies: AtomicU32,
    pub(crate) h2_data_frames: AtomicU64,
    /// HTTP/2 frames the peer sent that ask for work and start no request: PING,
    /// SETTINGS, PRIORITY, WINDOW_UPDATE. A flood of them is cut (see the watchdog).
    pub(crate) h2_control_frames: AtomicU64,
    /// Request body bytes this connection holds buffered right now (all streams). Shared
    /// with the requests' data, which may outlive the connection.
    body_bytes: Arc<AtomicU64>,
    /// The connection's slot and its place in the open-connection count: held as long as
    /// anything (hyper, a WebSocket task) still uses the connection.
    _open: Box<dyn Send + Sync>,
}

impl ConnState {
    pub fn new(peer: std::net::SocketAddr, client: Option<std::net::SocketAddr>, open: Box<dyn Send + Sync>, secure: bool) -> Arc<ConnState> {
        let peer_text = peer.to_string();
        Arc::new(ConnState {
            remote: client.map_or_else(|| peer_text.clone(), |c| c.to_string()),
            peer,
            peer_text,
            scheme: if secure { "https" } else { "http" },
            secure,
            is_h2: AtomicBool::new(false),
            in_flight: AtomicU32::new(0),
            head_pending: AtomicBool::new(false),
            events: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            started: AtomicBool::new(false),
            at_boundary: AtomicBool::new(true),
            write_blocked: AtomicBool::new(false),
            upgraded: AtomicBool::new(false),
            h2_sending: AtomicU32::new(0),
            h2_idle_bodies: AtomicU32::new(0),
            h2_data_frames: AtomicU64::new(0),
            h2_control_frames: AtomicU64::new(0),
            body_bytes: Arc::new(AtomicU64::new(0)),
            _open: open,
        })
    }

    pub(crate) fn on_read(&self, n: usize) {
        if n > 0 {
            self.events.fetch_add(1, Relaxed);
            if self.in_flight.load(Relaxed) == 0 {
                self.head_pending.store(true, Relaxed);
            }
            self.started.store(true, Relaxed);
        }
    }

    /// HTTP/2 reads: whether a head is pending comes from the frame boundaries, not from
    /// whether a request is in flight (streams interleave).
    pub(crate) fn h2_read(&self, n: usize, head_pending: bool) {
        if n > 0 {
            self.events.fetch_add(1, Relaxed);
            self.started.store(true, Relaxed);
        }
        if self.head_pending.load(Relaxed) != head_pending {
            self.head_pending.store(head_pending, Relaxed);
        }
    }

    pub(crate) fn on_write(&self, moved: bool) {
        if moved {
            self.events.fetch_add(1, Relaxed);
        }
        // Only store on change: this runs on every write.
        if self.write_blocked.load(Relaxed) == moved {
            self.write_blocked.store(!moved, Relaxed);
        }
    }

    /// Called when a request head is complete and handed to the service. The guard
    /// must live until hyper has taken the whole answer.
    pub fn request_started(self: &Arc<Self>, bodiless: bool) -> InFlight {
        self.in_flight.fetch_add(1, Relaxed);
        if !self.is_h2.load(Relaxed) {
            self.head_pending.store(false, Relaxed);
        }
        self.requests.fetch_add(1, Relaxed);
        self.events.fetch_add(1, Relaxed);
        InFlight { conn: self.clone(), bodiless, observed: None }
    }
}

/// Marks one request as being handled until dropped.
pub(crate) struct InFlight {
    conn: Arc<ConnState>,
    bodiless: bool,
    /// The access log's and the metrics' record of the request (when either is on); it is
    /// written when this guard goes, with the answer. Inline, not boxed: a box was an
    /// allocation and a free per request with metrics on, for some 40 bytes.
    pub(crate) observed: Option<crate::observe::Observed>,
}

impl InFlight {
    /// Counts answer body bytes handed to hyper (for the access log).
    #[inline]
    pub(crate) fn sent(&mut self, n: usize) {
        if let Some(o) = &mut self.observed {
            o.bytes += n as u64;
        }
    }
}

impl InFlight {
    /// A streamed answer has nothing to send (true) or has something again (false);
    /// called on changes only.
    pub fn body_idle(&self, idle: bool) {
        if idle {
            self.conn.h2_idle_bodies.fetch_add(1, Relaxed);
        } else {
            self.conn.h2_idle_bodies.fetch_sub(1, Relaxed);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let c = &self.conn;
        c.events.fetch_add(1, Relaxed);
        // Bytes read with a bodiless request that do not end at a head boundary are the
        // start of a pipelined request: its header clock starts now.
        if self.bodiless && !c.at_boundary.load(Relaxed) && !c.is_h2.load(Relaxed) {
            c.head_pending.store(true, Relaxed);
        }
        c.in_flight.fetch_sub(1, Relaxed);
    }
}

/// Body bytes held against a connection's budget, given back when the request's data
/// is freed. It holds the counter only: a request the host keeps does not keep its
/// connection open or counted.
pub(crate) struct BodyBudget {
    counter: Arc<AtomicU64>,
    bytes: u64,
}

impl BodyBudget {
    pub fn new(conn: &ConnState) -> BodyBudget {
        BodyBudget { counter: conn.body_bytes.clone(), bytes: 0 }
    }

    /// Reserves `n` more bytes; false (nothing reserved) when that would pass `limit`.
    pub fn take(&mut self, n: u64, limit: u64) -> bool {
        let mut now = self.counter.load(Relaxed);
        loop {
            let next = now.saturating_add(n);
            if next > limit {
                return false;
            }
            match self.counter.compare_exchange_weak(now, next, Relaxed, Relaxed) {
                Ok(_) => {
                    self.bytes += n;
                    return true;
                }
                Err(seen) => now = seen,
            }
        }
    }
}

impl Drop for BodyBudget {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.counter.fetch_sub(self.bytes, Relaxed);
        }
    }
}
