//! Where host callbacks run. Inline dispatch runs them on the I/O thread; pool dispatch on
//! a bounded set of long-lived threads (host runtimes such as Python and .NET attach each
//! thread once; the start/stop hooks let bindings prepare).
//!
//! Two kinds of work reach the pool: requests (a bounded queue: a full one is answered 503
//! by the caller) and callbacks of an ongoing exchange (stream events, WebSocket messages),
//! which come through a `Mailbox` so that one handle's callbacks run in order and never
//! at the same time.

use crate::handler::{self, Handler, Request};
use crate::log::Logger;
use crate::registry;
use crate::sysmon::{InlineSlot, InlineSlots};
use crate::queue::{LaneReceiver, LaneSender, TrySendError, Work};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

pub type ThreadHook = Arc<dyn Fn() + Send + Sync>;

#[derive(Clone, Default)]
pub struct Hooks {
    pub on_start: Option<ThreadHook>,
    pub on_stop: Option<ThreadHook>,
}

impl Hooks {
    pub(crate) fn start(&self) {
        run_hook(&self.on_start)
    }
    pub(crate) fn stop(&self) {
        run_hook(&self.on_stop)
    }
}

/// A panicking host hook must not take the engine thread down with it.
fn run_hook(hook: &Option<ThreadHook>) {
    if let Some(f) = hook {
        drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f())));
    }
}

/// A queued request holds only its handle: while it waits, its data lives in the
/// registry alone, so an expiry frees it at once however long the queue is stuck.
pub(crate) struct Job {
    pub handler: Handler,
    pub id: u64,
}

pub(crate) type Callback = Box<dyn FnOnce() + Send>;

enum Mode {
    Inline,
    /// `inline_budget` > 0 (auto dispatch): up to that many handlers run on I/O threads at
    /// once, and the runtime has one I/O thread more, so one is always free to serve the
    /// other connections while handlers block; past the budget, handlers go to the pool.
    /// Dropped with the dispatcher (the server stopped): the pool threads finish what is
    /// queued and exit.
    Pool { lanes: LaneSender<Job, Callback>, inline: Option<Arc<InlineSlots>> },
}

/// What connections and mailboxes hand their work to. Mailboxes hold it weakly: once
/// the server has stopped, nothing posted afterwards runs.
pub(crate) struct Dispatcher {
    pub server_id: u64,
    mode: Mode,
    /// The server's limit on a streamed answer's queue, for exchanges made by handle.
    pub stream_queue: usize,
}

pub(crate) enum Submit {
    Queued,
    Full,
    Closed,
}

impl Dispatcher {
    pub fn inline(server_id: u64, stream_queue: usize) -> Arc<Dispatcher> {
        Arc::new(Dispatcher { server_id, mode: Mode::Inline, stream_queue })
    }

    pub fn is_inline(&self) -> bool {
        matches!(self.mode, Mode::Inline)
    }

    /// Auto dispatch: a slot to run this handler on the calling I/O thread, if one is free.
    pub fn try_inline(&self) -> Option<InlineSlot<'_>> {
        match &self.mode {
            Mode::Pool { inline: Some(slots), .. } => slots.take(),
            _ => None,
        }
    }

    /// The inline slots of auto dispatch, for the monitor.
    pub fn inline_slots(&self) -> Option<&Arc<InlineSlots>> {
        match &self.mode {
            Mode::Pool { inline, .. } => inline.as_ref(),
            Mode::Inline => None,
        }
    }

    /// Hands a request to the pool (pool mode only).
    pub fn submit(&self, job: Job) -> Submit {
        match &self.mode {
            Mode::Inline => Submit::Closed,
            Mode::Pool { lanes, .. } => match lanes.try_request(job) {
                Ok(()) => Submit::Queued,
                Err(TrySendError::Full(_)) => Submit::Full,
                Err(TrySendError::Disconnected(_)) => Submit::Closed,
            },
        }
    }

    /// Runs a mailbox's drain where this server's callbacks run.
    fn schedule(&self, mailbox: Arc<Mailbox>) {
        match &self.mode {
            Mode::Inline => mailbox.drain(),
            Mode::Pool { lanes, .. } => {
                // The callback queue is unbounded on purpose: every handle posts a bounded
                // number of events (a final one, and one per refused write or read), and
                // WebSocket readers stop reading while their mailbox is full.
                lanes.callback(Box::new(move || mailbox.drain()));
            }
        }
    }
}

/// One handle's callbacks, run one at a time in the order posted, on the server's
/// callback threads (or inline).
pub(crate) struct Mailbox {
    dispatcher: Weak<Dispatcher>,
    server_id: u64,
    state: Mutex<MailState>,
}

#[derive(Default)]
struct MailState {
    queue: VecDeque<Callback>,
    running: bool,
}

impl Mailbox {
    pub fn new(dispatcher: &Arc<Dispatcher>) -> Arc<Mailbox> {
        Arc::new(Mailbox { dispatcher: Arc::downgrade(dispatcher), server_id: dispatcher.server_id, state: Mutex::default() })
    }

    /// Queues a callback; it runs after every callback posted before it.
    pub fn post(self: &Arc<Self>, job: Callback) {
        let Some(dispatcher) = self.dispatcher.upgrade() else { return };
        {
            let mut st = self.state.lock();
            st.queue.push_back(job);
            if st.running {
                return;
            }
            st.running = true;
        }
        dispatcher.schedule(self.clone());
    }

    fn drain(self: &Arc<Self>) {
        loop {
            let job = {
                let mut st = self.state.lock();
                match st.queue.pop_front() {
                    Some(job) => job,
                    None => {
                        st.running = false;
                        return;
                    }
                }
            };
            crate::inside::within(self.server_id, || drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))));
        }
    }
}

/// The callback threads. When the dispatcher is dropped (the server stopped), they
/// finish what is queued and exit.
pub(crate) struct Pool {
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// `inline_budget`: handlers that may run inline at once (auto dispatch), 0 for none.
    pub fn start(
        size: usize,
        queue: usize,
        stream_queue: usize,
        inline_budget: usize,
        handler_timeout: std::time::Duration,
        server_id: u64,
        hooks: Hooks,
        log: Logger,
    ) -> std::io::Result<(Pool, Arc<Dispatcher>)> {
        let (lanes, lanes_rx) = crate::queue::lanes::<Job, Callback>(queue);
        let mut pool = Pool { threads: Vec::with_capacity(size) };
        for n in 0..size {
            let thread_lanes = lanes_rx.clone();
            let (hooks, log) = (hooks.clone(), log.clone());
            let spawned = std::thread::Builder::new().name(format!("ember-cb-{n}")).spawn(move || {
                crate::inside::mark_engine_thread(server_id);
                hooks.start();
                work(server_id, &thread_lanes, &log);
                hooks.stop();
            });
            match spawned {
                Ok(t) => pool.threads.push(t),
                Err(e) => {
                    drop(lanes);
                    pool.join();
                    return Err(e);
                }
            }
        }
        let inline = (inline_budget > 0).then(|| InlineSlots::new(inline_budget, handler_timeout));
        let mode = Mode::Pool { lanes, inline };
        let dispatcher = Arc::new(Dispatcher { server_id, mode, stream_queue });
        Ok((pool, dispatcher))
    }

    /// Waits for the threads; call once the dispatcher is dropped.
    pub fn join(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A pool thread: callbacks of ongoing exchanges first (they free resources and keep
/// streams moving), then new requests; until the queues are closed and empty.
fn work(server_id: u64, lanes: &LaneReceiver<Job, Callback>, log: &Logger) {
    while let Some(work) = lanes.next() {
        match work {
            Work::Callback(cb) => cb(),
            // The client may have left (or the server stopped) while the job queued.
            Work::Request(job) => {
                if let Some(data) = registry::deliver(job.id) {
                    handler::invoke(server_id, &job.handler, &Request { data }, log);
                }
            }
        }
    }
}
