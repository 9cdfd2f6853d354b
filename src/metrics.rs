//! Metrics in the Prometheus text exposition format (version 0.0.4): the server's
//! counters, answers by status code and a histogram of request durations. Off by default;
//! when on, a request costs two clock reads and a few relaxed atomic adds.

use crate::stats::Counters;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the duration buckets, in microseconds (Prometheus' defaults, with
/// finer steps below 5 ms, where an in-process server's answers mostly land).
const BOUNDS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Answers by status code, 100 to 999 (the statuses an answer may carry).
pub(crate) struct StatusCodes(Box<[AtomicU64]>);

impl StatusCodes {
    pub fn new() -> StatusCodes {
        StatusCodes((100..1000).map(|_| AtomicU64::new(0)).collect())
    }

    pub fn count(&self, status: u16) {
        if let Some(c) = status.checked_sub(100).and_then(|i| self.0.get(i as usize)) {
            c.fetch_add(1, Relaxed);
        }
    }
}

/// Request durations: from the complete request head to the answer's last byte handed to
/// the connection (for a WebSocket, to the 101).
pub(crate) struct Metrics {
    /// The path the engine answers with the exposition itself; None: only through the ABI.
    pub path: Option<String>,
    buckets: [AtomicU64; BOUNDS_US.len() + 1],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Metrics {
    pub fn new(path: Option<String>) -> Metrics {
        Metrics { path, buckets: Default::default(), count: AtomicU64::new(0), sum_us: AtomicU64::new(0) }
    }

    pub fn observe(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let i = BOUNDS_US.partition_point(|&b| b < us);
        self.buckets[i].fetch_add(1, Relaxed);
        self.count.fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
    }

    /// The exposition text. `access_dropped`: lines the access log had to drop (None when
    /// it is off).
    pub fn render(&self, counters: &Counters, access_dropped: Option<u64>) -> String {
        let s = counters.snapshot();
        let mut out = String::with_capacity(4096);
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
        };
        metric("ember_requests_total", "counter", "Requests received, including those the engine answered itself.", s.requests);
        metric("ember_requests_active", "gauge", "Requests handed to the host and not answered yet.", s.active_requests);
        metric("ember_requests_held", "gauge", "Requests whose data the engine keeps for the host.", s.held_requests);
        metric("ember_connections_active", "gauge", "Connections open now.", s.active_connections);
        metric("ember_connections_total", "counter", "Connections accepted since start.", s.total_connections);
        metric("ember_received_bytes_total", "counter", "HTTP bytes read (after TLS decryption).", s.bytes_read);
        metric("ember_sent_bytes_total", "counter", "HTTP bytes written (before TLS encryption).", s.bytes_written);
        metric("ember_tls_handshakes_total", "counter", "TLS handshakes completed.", counters.tls_handshakes.load(Relaxed));
        metric("ember_tls_handshake_failures_total", "counter", "TLS handshakes that failed.", counters.tls_failures.load(Relaxed));
        if let Some(dropped) = access_dropped {
            metric("ember_access_log_dropped_total", "counter", "Access log lines dropped because the writer fell behind.", dropped);
        }
        out.push_str("# HELP ember_responses_total Answers sent, by status code.\n# TYPE ember_responses_total counter\n");
        if let Some(codes) = counters.by_code.get() {
            for (i, c) in codes.0.iter().enumerate() {
                let n = c.load(Relaxed);
                if n > 0 {
                    let _ = writeln!(out, "ember_responses_total{{code=\"{}\"}} {n}", i + 100);
                }
            }
        }
        let name = "ember_request_duration_seconds";
        let _ = write!(out, "# HELP {name} Time from a complete request head to the last byte of its answer.\n# TYPE {name} histogram\n");
        // The count is the buckets' sum as read, so +Inf and _count always agree.
        let mut cumulative = 0;
        for (i, bound) in BOUNDS_US.iter().enumerate() {
            cumulative += self.buckets[i].load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {cumulative}", seconds(*bound));
        }
        cumulative += self.buckets[BOUNDS_US.len()].load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
        let _ = writeln!(out, "{name}_sum {}", seconds(self.sum_us.load(Relaxed)));
        let _ = writeln!(out, "{name}_count {cumulative}");
        out
    }
}

/// Microseconds as seconds, without float noise ("0.00025", "2.5", "10").
fn seconds(us: u64) -> String {
    let (whole, frac) = (us / 1_000_000, us % 1_000_000);
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:06}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_cumulative_buckets() {
        let m = Metrics::new(None);
        m.observe(Duration::from_micros(80));
        m.observe(Duration::from_micros(100));
        m.observe(Duration::from_millis(3));
        m.observe(Duration::from_secs(60));
        let counters = Counters::default();
        let text = m.render(&counters, None);
        assert!(text.contains("ember_request_duration_seconds_bucket{le=\"0.0001\"} 2\n"), "{text}");
        assert!(text.contains("ember_request_duration_seconds_bucket{le=\"0.0025\"} 2\n"), "{text}");
        assert!(text.contains("ember_request_duration_seconds_bucket{le=\"0.005\"} 3\n"), "{text}");
        assert!(text.contains("ember_request_duration_seconds_bucket{le=\"10\"} 3\n"), "{text}");
        assert!(text.contains("ember_request_duration_seconds_bucket{le=\"+Inf\"} 4\n"), "{text}");
        assert!(text.contains("ember_request_duration_seconds_count 4\n"), "{text}");
        assert!(text.contains("ember_request_duration_seconds_sum 60.00318\n"), "{text}");
    }

    #[test]
    fn status_codes_are_counted_one_by_one() {
        let counters = Counters::default();
        let _ = counters.by_code.set(StatusCodes::new());
        for s in [200, 200, 404, 999, 99, 1000] {
            counters.status(s);
        }
        let text = Metrics::new(None).render(&counters, Some(3));
        assert!(text.contains("ember_responses_total{code=\"200\"} 2\n"), "{text}");
        assert!(text.contains("ember_responses_total{code=\"404\"} 1\n"), "{text}");
        assert!(text.contains("ember_responses_total{code=\"999\"} 1\n"), "{text}");
        assert!(!text.contains("code=\"99\""), "{text}");
        assert!(text.contains("ember_access_log_dropped_total 3\n"), "{text}");
    }
}
