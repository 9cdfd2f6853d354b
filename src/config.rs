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
        }
    }
}

/// Everything fixed at start.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: Vec<SocketAddr>,
    /// I/O threads; 0 means one per core.
    pub workers: usize,
    pub dispatch: Dispatch,
    /// Callback threads in pool mode; 0 means the default.
    pub pool_threads: usize,
    pub limits: Limits,
}

impl Default for Config {
    fn default() -> Self {
        Config { listen: Vec::new(), workers: 0, dispatch: Dispatch::Pool, pool_threads: 0, limits: Limits::default() }
    }
}

pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

impl Config {
    pub(crate) fn worker_threads(&self) -> usize {
        if self.workers == 0 { cores() } else { self.workers }
    }
    /// Enough threads that a few blocking handlers do not stall the rest.
    pub(crate) fn pool_size(&self) -> usize {
        if self.pool_threads == 0 { (cores() * 4).max(8) } else { self.pool_threads }
    }
}
