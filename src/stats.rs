//! Counters readable while the server runs.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A snapshot of the counters (C layout: the ABI hands it out as `ember_stats`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests received, including those the engine answered itself (404, 413 ...).
    pub requests: u64,
    pub responses_1xx: u64,
    pub responses_2xx: u64,
    pub responses_3xx: u64,
    pub responses_4xx: u64,
    pub responses_5xx: u64,
    /// Connections open now.
    pub active_connections: u64,
    /// Connections accepted since start.
    pub total_connections: u64,
    /// Requests handed to the host and not answered yet.
    pub active_requests: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub requests: AtomicU64,
    pub by_class: [AtomicU64; 5],
    pub active_connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub active_requests: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
}

impl Counters {
    pub fn status(&self, status: u16) {
        let class = (status / 100).clamp(1, 5) as usize - 1;
        self.by_class[class].fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> Stats {
        let c = |a: &AtomicU64| a.load(Relaxed);
        Stats {
            requests: c(&self.requests),
            responses_1xx: c(&self.by_class[0]),
            responses_2xx: c(&self.by_class[1]),
            responses_3xx: c(&self.by_class[2]),
            responses_4xx: c(&self.by_class[3]),
            responses_5xx: c(&self.by_class[4]),
            active_connections: c(&self.active_connections),
            total_connections: c(&self.total_connections),
            active_requests: c(&self.active_requests),
            bytes_read: c(&self.bytes_read),
            bytes_written: c(&self.bytes_written),
        }
    }
}
