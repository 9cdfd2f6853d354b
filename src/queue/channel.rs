//! The queues on crossbeam-channel (the `crossbeam` feature): the pool threads take callbacks
//! first, then wait on both queues at once with `select!`.

use super::Work;
pub(crate) use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};

pub(crate) struct LaneSender<J, C> {
    requests: Sender<J>,
    callbacks: Sender<C>,
}

pub(crate) struct LaneReceiver<J, C> {
    requests: Receiver<J>,
    callbacks: Receiver<C>,
}

pub(crate) fn lanes<J, C>(cap: usize) -> (LaneSender<J, C>, LaneReceiver<J, C>) {
    let (req_tx, req_rx) = crossbeam_channel::bounded(cap.max(1));
    let (cb_tx, cb_rx) = crossbeam_channel::unbounded();
    (LaneSender { requests: req_tx, callbacks: cb_tx }, LaneReceiver { requests: req_rx, callbacks: cb_rx })
}

impl<J, C> LaneSender<J, C> {
    pub fn try_request(&self, job: J) -> Result<(), TrySendError<J>> {
        self.requests.try_send(job)
    }

    /// A callback; dropped if the pool has closed.
    pub fn callback(&self, cb: C) {
        let _ = self.callbacks.send(cb);
    }
}

impl<J, C> Clone for LaneReceiver<J, C> {
    fn clone(&self) -> Self {
        LaneReceiver { requests: self.requests.clone(), callbacks: self.callbacks.clone() }
    }
}

impl<J, C> LaneReceiver<J, C> {
    /// The next work, callbacks first; `None` once both queues are closed and empty (both
    /// senders drop together, with the `LaneSender`).
    pub fn next(&self) -> Option<Work<J, C>> {
        if let Ok(cb) = self.callbacks.try_recv() {
            return Some(Work::Callback(cb));
        }
        crossbeam_channel::select! {
            recv(self.callbacks) -> cb => match cb {
                Ok(cb) => Some(Work::Callback(cb)),
                Err(_) => self.requests.recv().ok().map(Work::Request),
            },
            recv(self.requests) -> job => match job {
                Ok(job) => Some(Work::Request(job)),
                Err(_) => self.callbacks.recv().ok().map(Work::Callback),
            },
        }
    }
}
