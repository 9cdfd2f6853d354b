//! A streamed answer: the host writes chunks from any thread into a bounded queue; hyper
//! takes them as HTTP/1.1 chunks or HTTP/2 DATA frames. A write into a full queue is
//! refused (nothing taken) and the host hears `Writable` once half of it has drained, so
//! memory per answer stays bounded by the limit plus one chunk.

use crate::connstate::InFlight;
use crate::exchange::{Event, Exchange};
use crate::registry;
use crate::reply::BoxError;
use bytes::Bytes;
use hyper::body::{Body, Frame};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteError {
    /// The queue is full: try again after `Writable`.
    WouldBlock,
    /// The host already ended the answer.
    Ended,
    /// The client left or the server stopped.
    Closed,
}

pub(crate) struct Outbox {
    st: Mutex<OutState>,
    cond: Condvar,
    limit: usize,
}

#[derive(Default)]
struct OutState {
    queue: VecDeque<Bytes>,
    queued: usize,
    ended: bool,
    closed: bool,
    /// An answer to HEAD: what is written is dropped.
    discard: bool,
    /// A write was refused; `Writable` is due once the queue drains to half.
    refused: bool,
    waker: Option<Waker>,
}

impl Outbox {
    pub fn new(limit: usize) -> Arc<Outbox> {
        Arc::new(Outbox { st: Mutex::new(OutState::default()), cond: Condvar::new(), limit: limit.max(1) })
    }

    /// Queues a chunk. A chunk is taken whenever the queue is below its limit (so one
    /// chunk larger than the limit still goes through an empty queue).
    pub fn write(&self, data: Bytes) -> Result<(), WriteError> {
        let mut st = self.st.lock();
        if st.closed {
            return Err(WriteError::Closed);
        }
        if st.ended {
            return Err(WriteError::Ended);
        }
        if st.discard || data.is_empty() {
            return Ok(());
        }
        if st.queued >= self.limit {
            st.refused = true;
            return Err(WriteError::WouldBlock);
        }
        st.queued += data.len();
        st.queue.push_back(data);
        let waker = st.waker.take();
        drop(st);
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// The host's last word. Ok(true) when nothing more will be sent (an answer to HEAD).
    pub fn end(&self) -> Result<bool, WriteError> {
        let mut st = self.st.lock();
        if st.closed {
            return Err(WriteError::Closed);
        }
        if st.ended {
            return Err(WriteError::Ended);
        }
        st.ended = true;
        let done = st.discard;
        let waker = st.waker.take();
        drop(st);
        self.cond.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
        Ok(done)
    }

    /// The client left or the server stopped: writes fail, queued bytes are dropped.
    pub fn close(&self) {
        let mut st = self.st.lock();
        st.closed = true;
        st.queue.clear();
        st.queued = 0;
        drop(st);
        self.cond.notify_all();
    }

    /// The answer is to HEAD: what is queued or written is dropped. Returns (ended,
    /// refused): the host ended it already (so it is complete now; no later `end` will
    /// say so), and a write was refused (the host waits for `Writable`, which no reader
    /// will bring now).
    pub fn set_discard(&self) -> (bool, bool) {
        let mut st = self.st.lock();
        st.discard = true;
        st.queue.clear();
        st.queued = 0;
        let refused = std::mem::take(&mut st.refused);
        let ended = st.ended;
        drop(st);
        self.cond.notify_all();
        (ended, refused)
    }


    /// Blocks until a write would be taken, the answer ended, or `timeout` passed
    /// (None = no limit). Ok(true) = writable.
    pub fn wait_writable(&self, timeout: Option<Duration>) -> Result<bool, WriteError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut st = self.st.lock();
        loop {
            if st.closed {
                return Err(WriteError::Closed);
            }
            if st.ended {
                return Err(WriteError::Ended);
            }
            if st.queued < self.limit {
                return Ok(true);
            }
            st.refused = true;
            match deadline {
                None => self.cond.wait(&mut st),
                Some(d) => {
                    if self.cond.wait_until(&mut st, d).timed_out() {
                        return Ok(st.queued < self.limit);
                    }
                }
            }
        }
    }

    /// The next chunk for hyper, and whether the host should now hear `Writable`.
    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<(Bytes, bool)>> {
        let mut st = self.st.lock();
        if let Some(data) = st.queue.pop_front() {
            st.queued -= data.len();
            let writable = st.refused && st.queued <= self.limit / 2;
            if writable {
                st.refused = false;
            }
            drop(st);
            if writable {
                self.cond.notify_all();
            }
            return Poll::Ready(Some((data, writable)));
        }
        if st.ended || st.closed {
            return Poll::Ready(None);
        }
        if !st.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            st.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// The body hyper sends for a streamed answer.
pub(crate) struct StreamBody {
    out: Arc<Outbox>,
    ex: Arc<Exchange>,
    done: bool,
    /// The length the host stated, if any.
    declared: Option<u64>,
    _in_flight: Option<InFlight>,
}

impl StreamBody {
    pub fn new(out: Arc<Outbox>, ex: Arc<Exchange>, declared: Option<u64>, in_flight: Option<InFlight>) -> StreamBody {
        StreamBody { out, ex, done: false, declared, _in_flight: in_flight }
    }
}

impl Body for StreamBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match this.out.poll_next(cx) {
            Poll::Ready(Some((data, writable))) => {
                if writable {
                    this.ex.fire(Event::Writable);
                }
                if let Some(i) = &mut this._in_flight {
                    i.sent(data.len());
                }
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Poll::Ready(None) => {
                // Closed (not ended) means the client or the server gave up: an error makes
                // hyper end the connection or stream instead of a clean, truncated end.
                if this.out.st.lock().closed {
                    return Poll::Ready(Some(Err("the streamed answer was aborted".into())));
                }
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self.declared {
            Some(n) => hyper::body::SizeHint::with_exact(n),
            None => hyper::body::SizeHint::default(),
        }
    }
}

impl Drop for StreamBody {
    fn drop(&mut self) {
        self.ex.answer_done();
        if self.done {
            self.ex.fire(Event::Completed);
        } else {
            self.out.close();
            registry::stream_aborted(self.ex.id);
            self.ex.abort();
        }
    }
}
