//! The spare I/O thread of auto dispatch, kept asleep inside a task until a handler blocks.
//!
//! Auto dispatch runs one tokio worker more than `workers`, so that one is free to poll
//! the sockets while a handler blocks its own. Left free, that worker is woken by tokio's
//! scheduler to steal whenever another worker has tasks queued, and on a busy server the
//! two then take turns on a core: more context switches and fewer requests per second than
//! inline dispatch with the same `workers`. A worker busy running a task is neither parked
//! nor searching, so the scheduler neither wakes it nor counts on it: put to sleep *inside*
//! a task, the spare costs nothing until the monitor needs it. Which worker happens to take
//! the sleeping task does not matter; that one becomes the spare.

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;

#[derive(Default)]
pub(crate) struct Spare {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    /// The sleeping task's token while one should sleep.
    asleep: Option<u64>,
    next: u64,
}

impl Spare {
    /// Puts a worker to sleep, unless one already is (or its task is on its way).
    pub fn lull(self: &Arc<Self>, runtime: &tokio::runtime::Handle) {
        let token = {
            let mut s = self.state.lock();
            if s.asleep.is_some() {
                return;
            }
            s.next += 1;
            s.asleep = Some(s.next);
            s.next
        };
        let me = self.clone();
        drop(runtime.spawn(async move { me.sleep(token) }));
    }

    /// Wakes the sleeping worker: it steals the blocked worker's queued tasks, then polls
    /// the sockets. A task not yet started returns at once.
    pub fn wake(&self) -> bool {
        let woke = self.state.lock().asleep.take().is_some();
        if woke {
            self.wake.notify_all();
        }
        woke
    }

    pub fn asleep(&self) -> bool {
        self.state.lock().asleep.is_some()
    }

    fn sleep(&self, token: u64) {
        let mut s = self.state.lock();
        while s.asleep == Some(token) {
            self.wake.wait(&mut s);
        }
    }
}
