//! The future hyper keeps for each request, and the last steps of every request: counting
//! its status, the WebSocket hand-over, the access log's record, the response itself.

use super::Upgrade;
use crate::connstate::{ConnState, InFlight};
use crate::engine::Run;
use crate::exchange::Event;
use crate::front;
use crate::observe::Begun;
use crate::reply::Reply;
use crate::request::Answer;
use crate::stream::StreamBody;
#[cfg(feature = "ws")]
use crate::ws;
use bytes::Bytes;
use http::header::{HeaderValue, CONNECTION, CONTENT_LENGTH};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub(crate) type Later = Pin<Box<dyn Future<Output = (Answer, Upgrade)> + Send>>;

/// What hyper holds while a request is handled. A request whose answer came while the
/// service was called (the usual inline case) is `Done`: hyper moves this small value
/// around instead of the state of a request that waits, which was a kilobyte and more of
/// copying per request. A request that waits (its body, the pool, a host that answers
/// later, the front's work) carries its state boxed.
pub(crate) enum Handled {
    Done(Option<http::Response<Reply>>),
    Later(Later, Option<Box<Finish>>),
}

impl Future for Handled {
    type Output = Result<http::Response<Reply>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Handled::Done(resp) => Poll::Ready(Ok(resp.take().expect("a finished request is not polled again"))),
            Handled::Later(answer, finish) => {
                let (answer, upgrade) = std::task::ready!(answer.as_mut().poll(cx));
                let finish = finish.take().expect("a finished request is not polled again");
                Poll::Ready(Ok(finish.finish(answer, upgrade)))
            }
        }
    }
}

/// What the end of a request needs from its start.
pub(crate) struct Finish {
    pub run: Arc<Run>,
    pub conn: Arc<ConnState>,
    pub head_only: bool,
    pub is_h2: bool,
    /// The host's answer still carries the output cache's marker (no front took it off).
    pub strip: bool,
    pub begun: Option<Begun>,
    pub in_flight: InFlight,
}

impl Finish {
    pub fn finish(self, answer: Answer, upgrade: Upgrade) -> http::Response<Reply> {
        let Finish { run, conn, head_only, is_h2, strip, begun, in_flight } = self;
        finish(&run, &conn, answer, upgrade, head_only, is_h2, strip, begun, in_flight)
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn finish(
    run: &Run,
    conn: &Arc<ConnState>,
    mut answer: Answer,
    upgrade: Upgrade,
    head_only: bool,
    is_h2: bool,
    strip: bool,
    begun: Option<Begun>,
    mut in_flight: InFlight,
) -> http::Response<Reply> {
    if strip {
        front::strip_marker(&mut answer);
    }
    run.counters.status(answer.status);
    if run.health.is_draining() && !is_h2 && upgrade.is_none() {
        // Keep-alive clients (a proxy's upstream pool) reconnect, to another process.
        answer.headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    if let Some(upgrade) = upgrade {
        start_ws(run, conn, upgrade);
    }
    if let (Some(o), Some(b)) = (&run.observe, begun) {
        in_flight.observed = Some(o.observed(b, answer.status));
    }
    to_response(answer, head_only, is_h2, in_flight)
}

#[cfg(feature = "ws")]
fn start_ws(run: &Run, conn: &Arc<ConnState>, (ws, on_upgrade): (Arc<ws::WsConn>, hyper::upgrade::OnUpgrade)) {
    let limits = ws::WsLimits {
        max_message: run.limits.ws_max_message_bytes,
        ping_interval: run.limits.ws_ping_interval,
        stall: run.limits.idle_timeout.max(std::time::Duration::from_secs(1)),
    };
    tokio::spawn(ws::run(ws, on_upgrade, limits, run.shutdown.clone(), conn.clone()));
}

/// Without the `ws` feature no upgrade is ever taken (`Upgrade` has no value to start).
#[cfg(not(feature = "ws"))]
fn start_ws(_: &Run, _: &Arc<ConnState>, never: Infallible) {
    match never {}
}

fn to_response(answer: Answer, head_only: bool, is_h2: bool, in_flight: InFlight) -> http::Response<Reply> {
    let Answer { status, mut headers, body, declared_len, ex, streamed, file, .. } = answer;
    if is_h2 {
        // Connection-specific headers are forbidden in HTTP/2 (RFC 9113 §8.2.2).
        headers.remove(CONNECTION);
    }
    let out = if streamed { ex.as_ref().and_then(|e| e.outbox.get().cloned()) } else { None };
    let reply = match (out, ex) {
        (Some(out), Some(ex)) if !head_only => {
            if let Some(n) = declared_len {
                headers.insert(CONTENT_LENGTH, HeaderValue::from(n));
            }
            Reply::Stream(StreamBody::new(out, ex, declared_len, Some(in_flight)))
        }
        (Some(out), ex) => {
            if let Some(n) = declared_len {
                headers.insert(CONTENT_LENGTH, HeaderValue::from(n));
            }
            // HEAD: what the host streams is dropped; its end completes the exchange. The
            // host may have got there first (an inline handler always does).
            let (ended, refused) = out.set_discard();
            if let Some(ex) = ex {
                if refused {
                    ex.fire(Event::Writable);
                }
                if ended {
                    ex.fire(Event::Completed);
                }
            }
            Reply::full(Bytes::new(), Some(in_flight), None)
        }
        (None, ex) if head_only => {
            // HTTP/2 would send a HEAD body as given; the length still tells the client the
            // size. A host answering HEAD itself may state the size of what GET would send.
            let len = match declared_len {
                Some(n) if body.is_empty() => n,
                _ => body.len() as u64,
            };
            headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
            Reply::full(Bytes::new(), Some(in_flight), ex)
        }
        (None, _) if file.is_some() => {
            let mut file = file.expect("checked");
            file.set_in_flight(in_flight);
            Reply::File(file)
        }
        (None, ex) => Reply::full(body, Some(in_flight), ex),
    };
    let mut resp = http::Response::new(reply);
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    // `Response::new` made an empty map, which owns no memory: forgotten instead of
    // dropped, which walked its empty parts (about 60 instructions per request).
    let empty = std::mem::replace(resp.headers_mut(), headers);
    debug_assert_eq!(empty.capacity(), 0, "an empty map owns no memory");
    std::mem::forget(empty);
    resp
}
