//! Giving memory back to the system after a crowd of connections leaves. glibc's
//! allocator keeps freed blocks in its arenas (one per thread that allocated), so the RSS
//! of a server that held 10,000 WebSockets stays at its peak after they close. Every few
//! seconds this looks at the open-connection count; when it has fallen well below the peak
//! seen since the last trim, `malloc_trim` returns the free pages (on a blocking thread: it
//! walks the heaps).

use crate::stats::Counters;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

const LOOK_EVERY: Duration = Duration::from_secs(5);
/// Connections that must have left since the peak before trimming is worth it.
const LEFT_AT_LEAST: u64 = 500;

pub(crate) async fn watch(counters: Arc<Counters>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut peak = 0u64;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(LOOK_EVERY) => {}
            _ = shutdown.changed() => return,
        }
        let now = counters.active_connections.load(Relaxed);
        peak = peak.max(counters.peak_connections.swap(now, Relaxed)).max(now);
        if peak - now >= LEFT_AT_LEAST && now <= peak / 2 {
            peak = now;
            let _ = tokio::task::spawn_blocking(trim).await;
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only walks and releases the allocator's own free memory.
    unsafe { libc::malloc_trim(0) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
