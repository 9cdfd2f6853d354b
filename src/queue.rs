//! The engine's two queues between threads, on a parking_lot mutex and condition variable
//! (in every build already) rather than crossbeam-channel: crossbeam's channels and `select!`
//! were about 50 KB of the minimal library (README, Size), for queues that are a handful of
//! lines here. Both ends of a queue cost one uncontended lock per message; a waiting thread
//! is woken through the condition variable's futex, as crossbeam's waker did.
//!
//! `channel`: a bounded queue with several senders and receivers (the access log's lines and
//! its reopen answers). `Lanes`: the callback pool's two queues, the bounded one of requests
//! and the unbounded one of callbacks, which the pool threads wait on together.

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) enum TrySendError<T> {
    Full(T),
    Closed(T),
}

pub(crate) enum RecvTimeoutError {
    Timeout,
    Closed,
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
            return Err(TrySendError::Closed(msg));
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
                return Err(RecvTimeoutError::Closed);
            }
            if self.0.filled.wait_until(&mut st, deadline).timed_out() && st.items.is_empty() {
                return Err(if st.senders == 0 { RecvTimeoutError::Closed } else { RecvTimeoutError::Timeout });
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

/// The callback pool's queues: requests (bounded: a full queue is answered 503 by the caller)
/// and callbacks of ongoing exchanges (unbounded, and taken first: they free resources and
/// keep streams moving). Closed by `close` (the dispatcher's drop); the threads then finish
/// what is queued and stop.
pub(crate) struct Lanes<J, C> {
    state: Mutex<LaneState<J, C>>,
    ready: Condvar,
    cap: usize,
}

struct LaneState<J, C> {
    requests: VecDeque<J>,
    callbacks: VecDeque<C>,
    open: bool,
}

pub(crate) enum Work<J, C> {
    Request(J),
    Callback(C),
}

impl<J, C> Lanes<J, C> {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Lanes {
            state: Mutex::new(LaneState { requests: VecDeque::new(), callbacks: VecDeque::new(), open: true }),
            ready: Condvar::new(),
            cap: cap.max(1),
        })
    }

    fn wake_one(&self, st: MutexGuard<'_, LaneState<J, C>>) {
        drop(st);
        self.ready.notify_one();
    }

    /// A request, unless the queue is full or closed (the request comes back).
    pub fn try_request(&self, job: J) -> Result<(), TrySendError<J>> {
        let mut st = self.state.lock();
        if !st.open {
            return Err(TrySendError::Closed(job));
        }
        if st.requests.len() >= self.cap {
            return Err(TrySendError::Full(job));
        }
        st.requests.push_back(job);
        self.wake_one(st);
        Ok(())
    }

    /// A callback; dropped if the pool has closed.
    pub fn callback(&self, cb: C) {
        let mut st = self.state.lock();
        if st.open {
            st.callbacks.push_back(cb);
            self.wake_one(st);
        }
    }

    /// The next work, callbacks first; `None` once closed and empty.
    pub fn next(&self) -> Option<Work<J, C>> {
        let mut st = self.state.lock();
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
            self.ready.wait(&mut st);
        }
    }

    pub fn close(&self) {
        self.state.lock().open = false;
        self.ready.notify_all();
    }
}
