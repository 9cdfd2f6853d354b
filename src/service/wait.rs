//! Waiting for the host's answer: at once if an inline handler gave it, else until the
//! handler timeout, which for a body read in pieces runs only while the host owes a move.

use crate::engine::Run;
use crate::inbox::Inbox;
use crate::registry;
use crate::request::Answer;
use crate::response::canned;
use std::time::Duration;
use tokio::sync::oneshot;

/// The answer if it is there already.
pub(super) fn now(pending: &mut Pending, rx: &mut oneshot::Receiver<Answer>) -> Option<Answer> {
    match rx.try_recv() {
        Ok(a) => {
            // The sender went through a claim: the request has left Pending for good
            // (answered, streaming or refused), so the expiry on drop would change nothing.
            pending.0 = 0;
            Some(a)
        }
        // Ended already (the monitor expired a handler that blocked inline): a polled
        // finished receiver would panic.
        Err(oneshot::error::TryRecvError::Closed) => Some(canned(503, false)),
        Err(oneshot::error::TryRecvError::Empty) => None,
    }
}

pub(super) async fn wait(run: &Run, pending: &mut Pending, mut rx: oneshot::Receiver<Answer>, inbox: Option<&Inbox>) -> Answer {
    if let Some(a) = now(pending, &mut rx) {
        return a;
    }
    let limit = run.limits.handler_timeout;
    // A handler reading its body in pieces: while the body comes in, the handler timeout
    // runs only while the host owes a move (it has not started reading, or bytes wait for
    // it), so a slow client is not the host's fault and a host that never reads is still
    // answered. The whole timeout starts again once the body is in.
    if let Some(inbox) = inbox {
        loop {
            let owed = inbox.host_owes_since().map_or(Duration::ZERO, |t| t.elapsed());
            tokio::select! {
                r = &mut rx => return received(pending, r),
                _ = inbox.wait_finished() => break,
                _ = tokio::time::sleep(limit.saturating_sub(owed)), if !limit.is_zero() => {
                    if inbox.host_owes_since().is_some_and(|t| t.elapsed() >= limit) {
                        return timed_out(run, pending, rx, limit, "no answer and no body read").await;
                    }
                }
            }
        }
    }
    let r = if limit.is_zero() {
        (&mut rx).await
    } else {
        match tokio::time::timeout(limit, &mut rx).await {
            Ok(r) => r,
            Err(_) => return timed_out(run, pending, rx, limit, "no answer").await,
        }
    };
    received(pending, r)
}

/// What came through the channel: an answer (sent after a claim, so nothing is left to
/// end), or 503 if the request ended without one.
fn received(pending: &mut Pending, r: Result<Answer, oneshot::error::RecvError>) -> Answer {
    match r {
        Ok(a) => {
            pending.0 = 0;
            a
        }
        Err(_) => canned(503, false),
    }
}

/// The handler timeout passed: 503, unless the host's answer won the race.
async fn timed_out(run: &Run, pending: &mut Pending, rx: oneshot::Receiver<Answer>, limit: Duration, what: &str) -> Answer {
    if registry::expire(pending.0, true) {
        run.log.warn(&format!("request {:#x}: {what} within {} ms, answered 503", pending.0, limit.as_millis()));
        return canned(503, false);
    }
    // The host claimed the answer just before the timeout: it is on its way, and the
    // host was told it got through, so it is the one sent.
    received(pending, rx.await)
}

/// Ends the request in the registry if this future is dropped first (client gone, stop).
/// 0 once an answer came through, which can only follow a claim: nothing left to end.
pub(super) struct Pending(pub(super) u64);

impl Drop for Pending {
    fn drop(&mut self) {
        if self.0 != 0 {
            registry::expire(self.0, false);
        }
    }
}

