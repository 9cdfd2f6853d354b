//! Counters readable while the server runs.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// A snapshot of the counters (C layout: the ABI hands it out as `ember_stats`).
/// Fields are only ever appended; `size` tells which exist in the library that filled it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// `sizeof(ember_stats)` of the library that filled it.
    pub size: usize,
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
    /// Answers with a status of 600-999 (legal on the wire, outside the five classes).
    pub responses_other: u64,
    /// Requests whose data (views, body) the engine keeps for the host right now: those
    /// handed to a handler and not yet answered, and those that ended without the host's
    /// answer (timeout, client gone) until the host's answer attempt or stop.
    pub held_requests: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub requests: AtomicU64,
    /// 1xx..5xx, then 600-999.
    pub by_class: [AtomicU64; 6],
    pub active_connections: AtomicU64,
    /// The most connections open at once since the memory trimmer last looked (it
    /// resets it): a crowd that came and went between two looks is still seen.
    pub peak_connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub active_requests: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub held_requests: AtomicU64,
    pub tls_handshakes: AtomicU64,
    pub tls_failures: AtomicU64,
    /// Answers by status code: set at start when metrics are on, so that the hot path
    /// pays one load when they are off.
    pub by_code: once_cell::sync::OnceCell<crate::metrics::StatusCodes>,
}

impl Counters {
    pub fn status(&self, status: u16) {
        let class = match status / 100 {
            c @ 1..=5 => c as usize - 1,
            _ => 5,
        };
        self.by_class[class].fetch_add(1, Relaxed);
        if let Some(codes) = self.by_code.get() {
            codes.count(status);
        }
    }

    pub fn snapshot(&self) -> Stats {
        let c = |a: &AtomicU64| a.load(Relaxed);
        Stats {
            size: std::mem::size_of::<Stats>(),
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
            responses_other: c(&self.by_class[5]),
            held_requests: c(&self.held_requests),
        }
    }
}

/// Counts one request's data as held while alive.
pub(crate) struct Held(Arc<Counters>);

impl Held {
    pub fn new(counters: &Arc<Counters>) -> Held {
        counters.held_requests.fetch_add(1, Relaxed);
        Held(counters.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.held_requests.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_beyond_599_are_not_counted_as_server_errors() {
        let c = Counters::default();
        for s in [101, 204, 302, 404, 503, 599, 600, 799, 999] {
            c.status(s);
        }
        let s = c.snapshot();
        assert_eq!((s.responses_1xx, s.responses_2xx, s.responses_3xx, s.responses_4xx), (1, 1, 1, 1));
        assert_eq!(s.responses_5xx, 2);
        assert_eq!(s.responses_other, 3);
        assert_eq!(s.size, std::mem::size_of::<Stats>());
    }
}
