//! A request body the host reads in pieces (routes that opt into streaming): a pump task
//! moves the body from hyper into a small window; the host reads from any thread. The
//! pump stops reading while the window is full, so the client is held back by TCP flow
//! control, not by memory. The body limit and the minimum data rate still apply (the rate
//! only counts time spent waiting for the client, not for the host). Hyper answers
//! `Expect: 100-continue` when the body is first polled, which is when the host first
//! reads.

use crate::config::Limits;
use crate::exchange::{Event, Exchange};
use bytes::{Buf, Bytes};
use http_body_util::BodyExt;
use hyper::body::{Body, Incoming};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InError {
    /// Over the body limit; the engine answered 413.
    TooLarge,
    /// Slower than the minimum rate; the engine answered 408.
    TooSlow,
    /// The client left, the framing broke, or the server stopped.
    Gone,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Read {
    Data(usize),
    End,
    /// Nothing yet; `Readable` follows.
    Empty,
    Failed(InError),
}

pub(crate) struct Inbox {
    st: Mutex<InState>,
    cond: Condvar,
    /// Wakes the pump: the host started reading, or took data out of a full window.
    pump: Notify,
    /// Wakes whoever waits for the whole body to be in (the handler timeout starts then).
    finished: Notify,
    window: usize,
}

#[derive(Default)]
struct InState {
    chunks: VecDeque<Bytes>,
    buffered: usize,
    done: bool,
    error: Option<InError>,
    started: bool,
    /// A read found nothing: `Readable` is due when something arrives.
    want: bool,
    /// The body was never polled and never will be (the host answered without reading).
    abandoned: bool,
    /// Since when the host owes a move: it has not started reading, or bytes wait in the
    /// window for it. None while it waits for the client. The handler timeout runs on it.
    owed_since: Option<Instant>,
}

impl InState {
    /// The body is all in, failed, or was let go: nothing more will come for the host.
    fn settled(&self) -> bool {
        self.done || self.error.is_some() || self.abandoned
    }
}

/// Bytes held between the client and the host per streamed body.
pub(crate) const WINDOW: usize = 64 * 1024;

impl Inbox {
    pub fn new() -> Arc<Inbox> {
        let st = InState { owed_since: Some(Instant::now()), ..InState::default() };
        Arc::new(Inbox { st: Mutex::new(st), cond: Condvar::new(), pump: Notify::new(), finished: Notify::new(), window: WINDOW })
    }

    /// Copies up to `buf.len()` bytes. With `timeout` Some(0) it never blocks.
    pub fn read(&self, buf: &mut [u8], timeout: Option<Duration>) -> Read {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut st = self.st.lock();
        if !st.started {
            st.started = true;
            self.pump.notify_one();
        }
        loop {
            if !st.chunks.is_empty() {
                let mut n = 0;
                while n < buf.len() {
                    let Some(front) = st.chunks.front_mut() else { break };
                    let take = front.len().min(buf.len() - n);
                    buf[n..n + take].copy_from_slice(&front[..take]);
                    front.advance(take);
                    if front.is_empty() {
                        st.chunks.pop_front();
                    }
                    n += take;
                }
                let was_full = st.buffered >= self.window;
                st.buffered -= n;
                st.owed_since = (st.buffered > 0).then(Instant::now);
                if was_full && st.buffered < self.window {
                    self.pump.notify_one();
                }
                return Read::Data(n);
            }
            if let Some(e) = st.error {
                return Read::Failed(e);
            }
            if st.done {
                return Read::End;
            }
            // Everything that came is read: the host now waits for the client.
            st.owed_since = None;
            match deadline {
                Some(d) if Instant::now() >= d => {
                    st.want = true;
                    return Read::Empty;
                }
                Some(d) => {
                    self.cond.wait_until(&mut st, d);
                }
                None => self.cond.wait(&mut st),
            }
        }
    }

    pub fn fail(&self, e: InError) {
        let mut st = self.st.lock();
        if st.error.is_none() && !st.done {
            st.error = Some(e);
        }
        drop(st);
        self.cond.notify_all();
        self.pump.notify_one();
        self.finished.notify_waiters();
    }

    /// Resolves once the body is all in, or failed, or was let go.
    pub async fn wait_finished(&self) {
        loop {
            let notified = self.finished.notified();
            {
                if self.st.lock().settled() {
                    return;
                }
            }
            notified.await;
        }
    }

    /// The host answered without reading (all of) the body: the pump lets go of it.
    pub fn abandon(&self) {
        self.st.lock().abandoned = true;
        self.pump.notify_one();
        self.finished.notify_waiters();
    }

    /// Since when the host has owed a move on a body that is not all in yet (see
    /// `owed_since`); None while it waits for the client, or once the body is settled.
    pub fn host_owes_since(&self) -> Option<Instant> {
        let st = self.st.lock();
        if st.settled() {
            return None;
        }
        st.owed_since
    }

    pub fn is_finished(&self) -> bool {
        let st = self.st.lock();
        st.done || st.error.is_some()
    }

    /// Stores a chunk; true if the host should hear `Readable`.
    fn push(&self, data: Bytes) -> bool {
        let mut st = self.st.lock();
        st.buffered += data.len();
        st.chunks.push_back(data);
        if st.owed_since.is_none() {
            st.owed_since = Some(Instant::now());
        }
        let want = std::mem::take(&mut st.want);
        drop(st);
        self.cond.notify_all();
        want
    }

    fn finish(&self) -> bool {
        let mut st = self.st.lock();
        st.done = true;
        let want = std::mem::take(&mut st.want);
        drop(st);
        self.cond.notify_all();
        self.finished.notify_waiters();
        want
    }

    /// Fails the reader after the engine answered for it, and tells a waiting host.
    pub fn fail_reader(&self, e: InError, ex: &Exchange) {
        if self.fail_and_want(e) {
            ex.fire(Event::Readable);
        }
    }

    fn fail_and_want(&self, e: InError) -> bool {
        let want = std::mem::take(&mut self.st.lock().want);
        self.fail(e);
        want
    }

    /// Waits until the pump may read: the host started and the window has room. False
    /// when the body will never be read.
    async fn may_read(&self) -> bool {
        loop {
            let notified = self.pump.notified();
            {
                let st = self.st.lock();
                if st.abandoned || st.error.is_some() {
                    return false;
                }
                if st.started && st.buffered < self.window {
                    return true;
                }
            }
            notified.await;
        }
    }
}

/// Moves the body into the inbox until its end, an error, or the host lets go of it.
/// Returns the error the engine must answer for (413, 408, 400 for a broken body), if
/// any; the caller then fails the inbox with it (`fail_reader`).
pub(crate) async fn pump(mut body: Incoming, inbox: Arc<Inbox>, ex: Arc<Exchange>, limits: Limits) -> Option<InError> {
    let readable = |want: bool| {
        if want {
            ex.fire(Event::Readable);
        }
    };
    let max = limits.max_stream_body_bytes;
    let mut total: u64 = 0;
    // Time spent waiting for the client only: a host that reads slowly does not make
    // the client look slow.
    let mut waited = Duration::ZERO;
    loop {
        if body.is_end_stream() {
            readable(inbox.finish());
            return None;
        }
        if !inbox.may_read().await {
            return None;
        }
        let started = Instant::now();
        let next = if limits.min_body_rate == 0 {
            body.frame().await
        } else {
            let allowed = rate_deadline(total, waited, &limits);
            match tokio::time::timeout(allowed, body.frame()).await {
                Ok(f) => f,
                // The caller answers first, then fails the reader: the host must not be
                // able to answer in between.
                Err(_) => return Some(InError::TooSlow),
            }
        };
        waited += started.elapsed();
        match next {
            None => {
                readable(inbox.finish());
                return None;
            }
            // Broken framing (a bad chunk) or a reset: as for a buffered body, the engine
            // answers 400 and closes (the caller fails the reader).
            Some(Err(_)) => return Some(InError::Gone),
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else { continue };
                total += data.len() as u64;
                if total > max {
                    return Some(InError::TooLarge);
                }
                // The window, not the connection's body budget, bounds a streamed body.
                readable(inbox.push(data));
            }
        }
    }
}

/// How long the next frame may take before the body's average rate (over the time spent
/// waiting for the client) falls below the minimum, counting the grace period.
fn rate_deadline(total: u64, waited: Duration, limits: &Limits) -> Duration {
    // total bytes at `rate` bytes/s cover this much time; the grace comes on top.
    let covered = Duration::from_secs_f64(total as f64 / limits.min_body_rate as f64);
    (limits.body_rate_grace + covered).saturating_sub(waited).max(Duration::from_millis(10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_deadline_grows_with_the_bytes_received_and_shrinks_with_time_waited() {
        let limits = Limits { min_body_rate: 1000, body_rate_grace: Duration::from_secs(5), ..Limits::default() };
        assert_eq!(rate_deadline(0, Duration::ZERO, &limits), Duration::from_secs(5));
        assert_eq!(rate_deadline(2000, Duration::from_secs(1), &limits), Duration::from_secs(6));
        assert_eq!(rate_deadline(0, Duration::from_secs(9), &limits), Duration::from_millis(10));
    }

    #[test]
    fn reads_take_what_is_there_and_report_the_end() {
        let inbox = Inbox::new();
        assert!(!inbox.push(Bytes::from_static(b"hello ")));
        inbox.push(Bytes::from_static(b"world"));
        let mut buf = [0u8; 8];
        assert_eq!(inbox.read(&mut buf, Some(Duration::ZERO)), Read::Data(8));
        assert_eq!(&buf, b"hello wo");
        assert_eq!(inbox.read(&mut buf, Some(Duration::ZERO)), Read::Data(3));
        assert_eq!(inbox.read(&mut buf, Some(Duration::ZERO)), Read::Empty);
        assert!(inbox.finish(), "the empty read asked to hear of the end");
        assert_eq!(inbox.read(&mut buf, Some(Duration::ZERO)), Read::End);
    }
}
