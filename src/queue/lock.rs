//! The queues on a parking_lot mutex and condition variable (in every build already), for
//! builds without the `crossbeam` feature (the minimal library): crossbeam's channels and
//! `select!` are about 83 KB of it with their unwind tables, for queues that are a handful of
//! lines here. Fewer instructions per job than crossbeam under callgrind, but slower under
//! load (a waiting pool thread sleeps at once instead of spinning a little first), hence
//! crossbeam in the default build (README, Size).

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use super::Work;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) enum TrySendError<T> {
    Full(T),
    Disconnected(T),
}

pub(crate) enum RecvTimeoutError {
    Timeout,
    Disconnected,
}

struct Chan<T> {
    state: Mutex<ChanState<T>>,
    /// Signalled when a message arrives or the queue closes.
    filled: Condvar,
    /// Signalled when a full queue gets room (only `send` and `send_timeout` wait for it).
    emptied: Condvar,
    cap: usize,
}

struct ChanState<T> {
    items: VecDeque<T>,
    senders: usize,
    receivers: usize,
}

impl<T> ChanState<T> {
    fn closed(&self) -> bool {
        self.senders == 0 || self.receivers == 0
    }
}

pub(crate) struct Sender<T>(Arc<Chan<T>>);
pub(crate) struct Receiver<T>(Arc<Chan<T>>);

/// A queue of at most `cap` messages (at least 1).
pub(crate) fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        state: Mutex::new(ChanState { items: VecDeque::new(), senders: 1, receivers: 1 }),
        filled: Condvar::new(),
        emptied: Condvar::new(),
        cap: cap.max(1),
    });
    (Sender(chan.clone()), Receiver(chan))
}

impl<T> Sender<T> {
    pub fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        let mut st = self.0.state.lock();
        if st.closed() {
            return Err(TrySendError::Disconnected(msg));
        }
        if st.items.len() >= self.0.cap {
            return Err(TrySendError::Full(msg));
        }
        st.items.push_back(msg);
        drop(st);
        self.0.filled.notify_one();
        Ok(())
    }

    /// Waits for room until `deadline` (`None`: as long as it takes); the message back if
    /// the queue closed or the time ran out.
    fn send_until(&self, msg: T, deadline: Option<Instant>) -> Result<(), T> {
        let mut st = self.0.state.lock();
        loop {
            if st.closed() {
                return Err(msg);
            }
            if st.items.len() < self.0.cap {
                st.items.push_back(msg);
                drop(st);
                self.0.filled.notify_one();
                return Ok(());
            }
            match deadline {
                None => self.0.emptied.wait(&mut st),
                Some(d) => {
                    if self.0.emptied.wait_until(&mut st, d).timed_out() && st.items.len() >= self.0.cap {
                        return Err(msg);
                    }
                }
            }
        }
    }

    pub fn send(&self, msg: T) -> Result<(), T> {
        self.send_until(msg, None)
    }

    pub fn send_timeout(&self, msg: T, wait: Duration) -> Result<(), T> {
        self.send_until(msg, Some(Instant::now() + wait))
    }
}

impl<T> Receiver<T> {
    pub fn recv_timeout(&self, wait: Duration) -> Result<T, RecvTimeoutError> {
        let deadline = Instant::now() + wait;
        let mut st = self.0.state.lock();
        loop {
            if let Some(msg) = st.items.pop_front() {
                let was_full = st.items.len() + 1 >= self.0.cap;
                drop(st);
                if was_full {
                    self.0.emptied.notify_one();
                }
                return Ok(msg);
            }
            if st.senders == 0 {
                return Err(RecvTimeoutError::Disconnected);
            }
            if self.0.filled.wait_until(&mut st, deadline).timed_out() && st.items.is_empty() {
                return Err(if st.senders == 0 { RecvTimeoutError::Disconnected } else { RecvTimeoutError::Timeout });
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.state.lock().items.is_empty()
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut st = self.0.state.lock();
        st.senders -= 1;
        if st.senders == 0 {
            drop(st);
            self.0.filled.notify_all();
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut st = self.0.state.lock();
        st.receivers -= 1;
        if st.receivers == 0 {
            // Nothing will read what is queued: free it now, and let waiting senders go.
            let items = std::mem::take(&mut st.items);
            drop(st);
            self.0.emptied.notify_all();
            drop(items);
        }
    }
}

/// The callback pool's queues (see `super`); closed when the `LaneSender` drops.
struct Lanes<J, C> {
    state: Mutex<LaneState<J, C>>,
    ready: Condvar,
    cap: usize,
}

struct LaneState<J, C> {
    requests: VecDeque<J>,
    callbacks: VecDeque<C>,
    open: bool,
}

pub(crate) struct LaneSender<J, C>(Arc<Lanes<J, C>>);
pub(crate) struct LaneReceiver<J, C>(Arc<Lanes<J, C>>);

pub(crate) fn lanes<J, C>(cap: usize) -> (LaneSender<J, C>, LaneReceiver<J, C>) {
    let lanes = Arc::new(Lanes {
        state: Mutex::new(LaneState { requests: VecDeque::new(), callbacks: VecDeque::new(), open: true }),
        ready: Condvar::new(),
        cap: cap.max(1),
    });
    (LaneSender(lanes.clone()), LaneReceiver(lanes))
}

impl<J, C> Lanes<J, C> {
    fn wake_one(&self, st: MutexGuard<'_, LaneState<J, C>>) {
        drop(st);
        self.ready.notify_one();
    }

    fn close(&self) {
        self.state.lock().open = false;
        self.ready.notify_all();
    }
}

impl<J, C> LaneSender<J, C> {
    /// A request, unless the queue is full or closed (the request comes back).
    pub fn try_request(&self, job: J) -> Result<(), TrySendError<J>> {
        let mut st = self.0.state.lock();
        if !st.open {
            return Err(TrySendError::Disconnected(job));
        }
        if st.requests.len() >= self.0.cap {
            return Err(TrySendError::Full(job));
        }
        st.requests.push_back(job);
        self.0.wake_one(st);
        Ok(())
    }

    /// A callback; dropped if the pool has closed.
    pub fn callback(&self, cb: C) {
        let mut st = self.0.state.lock();
        if st.open {
            st.callbacks.push_back(cb);
            self.0.wake_one(st);
        }
    }
}

impl<J, C> Drop for LaneSender<J, C> {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl<J, C> LaneReceiver<J, C> {
    /// The next work, callbacks first; `None` once closed and empty.
    pub fn next(&self) -> Option<Work<J, C>> {
        let mut st = self.0.state.lock();
        loop {
            if let Some(cb) = st.callbacks.pop_front() {
                return Some(Work::Callback(cb));
            }
            if let Some(job) = st.requests.pop_front() {
                return Some(Work::Request(job));
            }
            if !st.open {
                return None;
            }
            self.0.ready.wait(&mut st);
        }
    }
}

impl<J, C> Clone for LaneReceiver<J, C> {
    fn clone(&self) -> Self {
        LaneReceiver(self.0.clone())
    }
}
