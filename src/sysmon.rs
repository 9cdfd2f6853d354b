//! The inline slots of auto dispatch, and the monitor that keeps a blocked one from
//! stalling the server (as Go's sysmon hands off a processor stuck in a syscall).
//!
//! tokio polls sockets only on a worker that parks. When a handler blocks on the worker
//! that last took the I/O events, the spare worker sleeps on its condition variable and
//! nobody polls: the whole server waits for that handler. The monitor looks every few
//! milliseconds; a slot that has stayed busy with the same handler since its last look gets
//! the runtime poked (an empty task from outside wakes a parked worker, which then steals
//! the blocked worker's queue and parks on the I/O driver). Fast handlers never notice it:
//! the hot path only flips a flag and bumps a counter in its slot.
//!
//! Stock tokio wakes a parked worker whenever a worker finds more than one task ready, so
//! the spare shared every burst of work with the busy worker: two threads taking turns on
//! one core's worth of requests, twice the context switches, and a p99 that waited on the
//! other thread's turn. Our tokio (vendor/tokio, scripts/vendor_tokio.sh) caps how many
//! workers notifications keep awake; the cap is the number of slots, lifted by the monitor
//! only while a slot is stuck. The spare then sleeps until it is needed, and the workers
//! run as inline dispatch's would.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a handler may hold an I/O thread before the runtime is poked.
const LOOK_EVERY: Duration = Duration::from_millis(2);
/// How long the monitor sleeps when no handler ran inline lately.
const IDLE_LOOK: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Slot {
    busy: AtomicBool,
    /// Bumped by every handler that takes the slot.
    entries: AtomicU64,
    /// The request whose handler holds the slot.
    request: AtomicU64,
}

pub(crate) struct InlineSlots {
    slots: Vec<Slot>,
    /// Set while the monitor sleeps its long idle look: the next handler to take a slot
    /// rings `bell`, so a handler that blocks right after a quiet spell is timed from its
    /// start and not up to `IDLE_LOOK` later.
    idle: AtomicBool,
    /// The monitor's sleep: `true` once the server stops.
    bell: Arc<(Mutex<bool>, Condvar)>,
    /// The server's handler timeout (zero = none): a handler that blocks inline past it has
    /// its request expired from here, as the timer of its own (blocked) task cannot.
    handler_timeout: Duration,
}

/// A taken slot, given back when dropped.
pub(crate) struct InlineSlot<'a>(&'a Slot);

impl InlineSlot<'_> {
    /// Names the request whose handler runs in this slot.
    pub fn running(&self, request: u64) {
        self.0.request.store(request, Ordering::Relaxed);
    }
}

impl Drop for InlineSlot<'_> {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

impl InlineSlots {
    pub fn new(n: usize, handler_timeout: Duration) -> Arc<InlineSlots> {
        let bell = Arc::new((Mutex::new(false), Condvar::new()));
        Arc::new(InlineSlots { slots: (0..n).map(|_| Slot::default()).collect(), idle: AtomicBool::new(false), bell, handler_timeout })
    }

    pub fn take(&self) -> Option<InlineSlot<'_>> {
        for slot in &self.slots {
            if !slot.busy.load(Ordering::Relaxed) && slot.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                // SeqCst pairs with the monitor's store of `idle` and its re-read of the
                // entries: either it sees this entry, or this sees it idle (then the lock
                // waits until it sleeps, so the ring is not lost).
                slot.entries.fetch_add(1, Ordering::SeqCst);
                if self.idle.load(Ordering::SeqCst) && self.idle.swap(false, Ordering::SeqCst) {
                    let _sleeping = self.bell.0.lock();
                    self.bell.1.notify_all();
                }
                return Some(InlineSlot(slot));
            }
        }
        None
    }

    fn entries(&self) -> u64 {
        self.slots.iter().map(|s| s.entries.load(Ordering::SeqCst)).sum()
    }
}

/// The monitor thread of one server; stopped (and joined) by `stop`.
pub(crate) struct Sysmon {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Sysmon {
    pub fn start(slots: &Arc<InlineSlots>, runtime: tokio::runtime::Handle) -> std::io::Result<Sysmon> {
        // The spare stays parked while no handler is stuck: notifications wake at most
        // one worker per slot, as many as inline dispatch runs.
        runtime.set_notify_limit(slots.slots.len());
        let stop = slots.bell.clone();
        let (weak, flag) = (Arc::downgrade(slots), stop.clone());
        let thread = std::thread::Builder::new().name("ember-sysmon".into()).spawn(move || watch(weak, runtime, flag))?;
        Ok(Sysmon { stop, thread: Some(thread) })
    }

    pub fn stop(mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch(slots: Weak<InlineSlots>, runtime: tokio::runtime::Handle, stop: Arc<(Mutex<bool>, Condvar)>) {
    let mut seen: Vec<u64> = Vec::new();
    let mut last_total = 0;
    let mut poked: Vec<bool> = Vec::new();
    // Since when each slot has held the same handler (as seen by this thread).
    let mut since: Vec<Option<std::time::Instant>> = Vec::new();
    let mut raised = false;
    loop {
        let Some(slots) = slots.upgrade() else { return };
        let total = slots.entries();
        let active = total != last_total || slots.slots.iter().any(|s| s.busy.load(Ordering::Relaxed));
        last_total = total;
        seen.resize(slots.slots.len(), u64::MAX);
        poked.resize(slots.slots.len(), false);
        since.resize(slots.slots.len(), None);
        let mut any_stuck = false;
        for (i, slot) in slots.slots.iter().enumerate() {
            let entries = slot.entries.load(Ordering::Relaxed);
            let busy = slot.busy.load(Ordering::Acquire);
            let stuck = busy && entries == seen[i];
            any_stuck |= stuck;
            if stuck && !poked[i] {
                if !raised {
                    runtime.set_notify_limit(usize::MAX);
                    raised = true;
                }
                // One empty task per stuck handler is enough to get a worker polling.
                drop(runtime.spawn(async {}));
                poked[i] = true;
            } else if !stuck {
                poked[i] = false;
            }
            // The handler timeout counts from the first sighting of this handler, never
            // later than a look after it began: late, never early.
            if !busy {
                since[i] = None;
            } else if entries != seen[i] {
                since[i] = Some(std::time::Instant::now());
            }
            if let Some(t) = since[i] {
                if !slots.handler_timeout.is_zero() && t.elapsed() + LOOK_EVERY >= slots.handler_timeout {
                    // The host's late answer then gets EMBER_ERR_TIMED_OUT, and the client
                    // its 503 once the handler returns and frees the connection.
                    crate::registry::expire(slot.request.load(Ordering::Relaxed), true);
                    since[i] = None;
                }
            }
            seen[i] = entries;
        }
        if raised && !any_stuck {
            runtime.set_notify_limit(slots.slots.len());
            raised = false;
        }
        let mut stopped = stop.0.lock();
        if *stopped {
            return;
        }
        if active {
            drop(slots);
            stop.1.wait_for(&mut stopped, LOOK_EVERY);
        } else {
            slots.idle.store(true, Ordering::SeqCst);
            if slots.entries() != total {
                // A handler began since the look: no long sleep.
                slots.idle.store(false, Ordering::SeqCst);
                drop(slots);
                stop.1.wait_for(&mut stopped, LOOK_EVERY);
            } else {
                drop(slots);
                stop.1.wait_for(&mut stopped, IDLE_LOOK);
            }
        }
        if *stopped {
            return;
        }
    }
}
