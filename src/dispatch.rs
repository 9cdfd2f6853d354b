//! The callback thread pool (pool dispatch). Threads are long-lived so host runtimes
//! (Python, .NET) attach each thread once; the start/stop hooks let bindings prepare.

use crate::handler::{self, Handler, Request};
use crate::log::Logger;
use crate::registry;
use std::sync::Arc;
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

/// The callback threads; jobs arrive on the `Sender` the server hands to its connections.
/// The queue is bounded (`max_queued`): a full queue is answered 503 by the caller.
/// When every sender is gone the threads finish what is queued and exit.
pub(crate) struct Pool {
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    pub fn start(size: usize, queue: usize, server_id: u64, hooks: Hooks, log: Logger) -> std::io::Result<(Pool, crossbeam_channel::Sender<Job>)> {
        let (tx, rx) = crossbeam_channel::bounded::<Job>(queue.max(1));
        let mut pool = Pool { threads: Vec::with_capacity(size) };
        for n in 0..size {
            let rx = rx.clone();
            let (hooks, log) = (hooks.clone(), log.clone());
            let spawned = std::thread::Builder::new().name(format!("ember-cb-{n}")).spawn(move || {
                crate::inside::mark_engine_thread(server_id);
                hooks.start();
                for job in rx.iter() {
                    // The client may have left (or the server stopped) while the job queued.
                    if let Some(data) = registry::deliver(job.id) {
                        handler::invoke(server_id, &job.handler, &Request { data }, &log);
                    }
                }
                hooks.stop();
            });
            match spawned {
                Ok(t) => pool.threads.push(t),
                Err(e) => {
                    drop(tx);
                    pool.join();
                    return Err(e);
                }
            }
        }
        Ok((pool, tx))
    }

    /// Waits for the threads; call once every sender is dropped.
    pub fn join(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
