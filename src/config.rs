//! Server options and their defaults.

use std::net::SocketAddr;
use std::time::Duration;

/// Where host callbacks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatch {
    /// On the I/O worker thread: fastest; the handler must not block.
    Inline,
    /// On a bounded pool of long-lived threads: blocking handlers are safe.
    Pool,
    /// On the I/O thread while that is safe, else on the pool: the runtime keeps one I/O
    /// thread more than `workers`, at most `workers` handlers run inline at once, and the
    /// rest go to the pool. A handler that blocks only holds its own I/O thread; the spare
    /// one serves everything else.
    Auto,
}

/// Limits; every one has a safe default. A zero `Duration` turns that timeout off.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_header_bytes: usize,
    pub max_headers: usize,
    pub max_body_bytes: u64,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    pub handler_timeout: Duration,
    /// A request body must arrive at this average rate (bytes/s) once `body_rate_grace`
    /// has passed, or it is answered 408 and the connection closed. 0 = off.
    pub min_body_rate: u64,
    pub body_rate_grace: Duration,
    /// Requests waiting for a pool thread at most; more are answered 503.
    pub max_queued: usize,
    /// Request body bytes one connection may hold buffered at once (all its HTTP/2
    /// streams together); a stream that would pass it is answered 503.
    pub max_conn_body_bytes: u64,
    /// The body limit of routes that stream their body to the host (they hold a small
    /// window, not the body, so it can be far above `max_body_bytes`).
    pub max_stream_body_bytes: u64,
    /// Bytes a streamed answer may have queued before writes are refused (WouldBlock).
    pub stream_queue_bytes: usize,
    /// The largest WebSocket message (and frame) accepted; larger ones close with 1009.
    pub ws_max_message_bytes: usize,
    /// Bytes a WebSocket connection may have queued to send before sends are refused;
    /// also how much received data may wait for the host before reading pauses.
    pub ws_queue_bytes: usize,
    /// An idle WebSocket gets a ping this often and is cut if the next one finds no
    /// answer. Zero turns pings off.
    pub ws_ping_interval: Duration,
    /// Open WebSocket connections per route at most; more are answered 503.
    pub ws_max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: 16 * 1024,
            max_headers: 100,
            max_body_bytes: 16 * 1024 * 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            max_connections: 10_000,
            handler_timeout: Duration::from_secs(30),
            // Kestrel's defaults: generous for real clients, fatal for a trickle.
            min_body_rate: 240,
            body_rate_grace: Duration::from_secs(5),
            max_queued: 4096,
            max_conn_body_bytes: 64 * 1024 * 1024,
            max_stream_body_bytes: 1 << 30,
            stream_queue_bytes: 256 * 1024,
            ws_max_message_bytes: 1024 * 1024,
            ws_queue_bytes: 1024 * 1024,
            ws_ping_interval: Duration::from_secs(30),
            ws_max_connections: 100_000,
        }
    }
}

impl Limits {
    /// The limits as the engine uses them: values no server could honour (a timeout of
    /// 580 million years, ten billion headers) are cut to the largest ones that work, so
    /// arithmetic on them can neither overflow nor allocate without bound. The C ABI
    /// refuses such values outright; the Rust API gets them clamped.
    pub(crate) fn clamped(&self) -> Limits {
        const LONGEST: Duration = Duration::from_millis(1 << 40);
        let mut l = self.clone();
        for d in [&mut l.header_timeout, &mut l.idle_timeout, &mut l.handler_timeout, &mut l.body_rate_grace, &mut l.ws_ping_interval] {
            *d = (*d).min(LONGEST);
        }
        l.max_header_bytes = l.max_header_bytes.clamp(1024, 64 << 20);
        l.max_headers = l.max_headers.clamp(1, 10_000);
        l.max_queued = l.max_queued.clamp(1, 1 << 20);
        l.max_connections = l.max_connections.clamp(1, 1 << 24);
        l
    }
}

/// One listen address and how its socket is set up.
#[derive(Debug, Clone)]
pub struct Listen {
    pub addr: SocketAddr,
    /// SO_REUSEPORT: several processes (or servers) share the port; the kernel spreads
    /// connections among them.
    pub reuse_port: bool,
    /// Every connection starts with a PROXY protocol header (v1 or v2) naming the client.
    pub proxy_protocol: bool,
    /// A TLS listener's certificates (`Server::listen_tls`).
    pub(crate) tls: Option<std::sync::Arc<crate::tls::TlsSite>>,
}

/// Everything fixed at start.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: Vec<Listen>,
    /// I/O threads; 0 means one per core.
    pub workers: usize,
    pub dispatch: Dispatch,
    /// Callback threads in pool mode; 0 means the default.
    pub pool_threads: usize,
    pub limits: Limits,
    /// A path the engine answers itself: 200 `{"status": "ok"}`, 503 while draining.
    pub health_path: Option<String>,
    /// Proxies whose PROXY headers and Forwarded / X-Forwarded-* headers are believed.
    pub trusted_proxies: crate::proxy::Trusted,
    /// The access log and the metrics (both off by default).
    pub(crate) observe: crate::observe::ObserveConfig,
    /// Static mounts, compression, output cache, CORS, request filtering.
    pub front: crate::front::FrontConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: Vec::new(),
            workers: 0,
            dispatch: Dispatch::Auto,
            pool_threads: 0,
            limits: Limits::default(),
            health_path: None,
            trusted_proxies: Default::default(),
            observe: Default::default(),
            front: Default::default(),
        }
    }
}

pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

impl Config {
    pub(crate) fn worker_threads(&self) -> usize {
        if self.workers == 0 { cores() } else { self.workers }
    }

    /// I/O threads the runtime really runs: auto dispatch keeps one spare.
    pub(crate) fn runtime_threads(&self) -> usize {
        self.worker_threads() + usize::from(self.dispatch == Dispatch::Auto)
    }
    /// Enough threads that a few blocking handlers do not stall the rest.
    pub(crate) fn pool_size(&self) -> usize {
        if self.pool_threads == 0 { (cores() * 4).max(8) } else { self.pool_threads }
    }
}
