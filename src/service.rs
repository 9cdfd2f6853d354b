//! One request: limits, routing, the body (whole, or streamed to the host), handing it to
//! the host, waiting for the answer (whole, streamed, or a WebSocket accept).

use crate::body;
use crate::connstate::{BodyBudget, ConnState};
use crate::dispatch::{Job, Submit};
#[cfg(feature = "ws")]
use crate::dispatch::Mailbox;
use crate::engine::Run;
use crate::error::ErrorKind;
use crate::exchange::{Event, Exchange};
use crate::front;
use crate::handler::{self, Handler, Request};
use crate::inbox::{self, InError, Inbox};
use crate::registry;
use crate::request::{Answer, Parts, RequestData};
use crate::response::canned;
use crate::router::{Endpoint, Match};
#[cfg(feature = "ws")]
use crate::ws::{self, UpgradeCheck, WsConn};
use bytes::Bytes;
use http::header::{HeaderValue, ALLOW};
use http::{Method, Version};
use hyper::body::{Body, Incoming};
use std::sync::atomic::Ordering::Relaxed;
#[cfg(not(feature = "ws"))]
use std::convert::Infallible;
use std::sync::Arc;

/// `ember_request_info.flags`: the body is read with `ember_request_read`.
pub const FLAG_BODY_STREAMED: u32 = 1;
/// `ember_request_info.flags`: a WebSocket upgrade request.
pub const FLAG_WEBSOCKET: u32 = 2;
/// `ember_request_info.flags`: the request came over TLS.
pub const FLAG_TLS: u32 = 4;

mod finish;
mod head;
mod wait;

pub(crate) use finish::Handled;
use finish::{Finish, Later};
pub(crate) use head::Head;
use wait::{now, wait, Pending};

/// Called by hyper for each request. Everything that needs no waiting runs here, in the
/// call: a request without a body answered by an inline handler is finished before
/// hyper polls it.
pub(crate) fn handle(run: &Arc<Run>, conn: &Arc<ConnState>, req: http::Request<Incoming>) -> Handled {
    // Taken apart once, here: the request (264 bytes) moved whole into the fast path was
    // one more copy of it per request.
    let (mut parts, body) = req.into_parts();
    let head = head::scan(parts.version, &parts.headers);
    let begun = run.observe.as_ref().map(|o| o.begin(&parts, conn));
    let in_flight = conn.request_started(head.bodiless);
    run.counters.requests.fetch_add(1, Relaxed);
    let head_only = parts.method == Method::HEAD;
    let is_h2 = parts.version == Version::HTTP_2;
    let later = |answer: Later, strip: bool, begun, in_flight| {
        let finish = Finish { run: run.clone(), conn: conn.clone(), head_only, is_h2, strip, begun, in_flight };
        Handled::Later(answer, Some(Box::new(finish)))
    };
    let ctx = if run.front.is_some() {
        // The engine's own answers are finished here, like an inline handler's.
        match front::enter(run, conn, &mut parts, &head, begun.as_ref().map(|b| b.start())) {
            front::Entry::Answered(a) => {
                drop_rest(parts);
                return Handled::Done(Some(finish::finish(run, conn, a, None, head_only, is_h2, false, begun, in_flight)));
            }
            front::Entry::Later(a) => return later(Box::pin(async move { (a.await, None) }), false, begun, in_flight),
            front::Entry::Pass(ctx) => ctx,
        }
    } else {
        None
    };
    // The usual request is answered in the call, and the front's part of the answer done
    // there too unless it has to wait. Without a front, `finish` takes the cache marker off
    // (strip): leave_now would only do that, for a move of the answer more.
    match answer_now(run, conn, parts, body, head) {
        Ok((a, upgrade)) if ctx.is_none() => Handled::Done(Some(finish::finish(run, conn, a, upgrade, head_only, is_h2, true, begun, in_flight))),
        Ok((a, upgrade)) => match front::leave_now(ctx, a) {
            Ok(a) => Handled::Done(Some(finish::finish(run, conn, a, upgrade, head_only, is_h2, false, begun, in_flight))),
            Err(rest) => later(Box::pin(async move { (rest.await, upgrade) }), false, begun, in_flight),
        },
        Err(answer) if ctx.is_none() => later(answer, true, begun, in_flight),
        Err(answer) => later(
            Box::pin(async move {
                let (a, upgrade) = answer.await;
                (front::leave(ctx, a).await, upgrade)
            }),
            false,
            begun,
            in_flight,
        ),
    }
}

/// Drops what is left of a request the front answered. A cache hit took its header map
/// for the answer and left an empty one, which owns no memory: forgotten, not dropped
/// (dropping walked its empty parts).
fn drop_rest(parts: http::request::Parts) {
    let http::request::Parts { method, uri, headers, extensions, .. } = parts;
    if headers.capacity() == 0 {
        std::mem::forget(headers);
    } else {
        drop(headers);
    }
    drop((method, uri, extensions));
}

#[cfg(feature = "ws")]
type Upgrade = Option<(Arc<WsConn>, hyper::upgrade::OnUpgrade)>;
/// Without the `ws` feature no WebSocket route exists, so no upgrade is ever taken.
#[cfg(not(feature = "ws"))]
type Upgrade = Option<Infallible>;

/// The usual request without waiting: no body, a plain handler, answered while it ran.
/// Anything else goes on, boxed, from the point where it has to wait. Out of line: the
/// front's answers (a cache hit) skip it, and inlined, its code lay between theirs (on
/// 2026-12-05 a hit took 50 instructions and 50 L1i misses more that way, callgrind; the
/// call costs the usual request a handful).
#[inline(never)]
fn answer_now(run: &Arc<Run>, conn: &Arc<ConnState>, parts: http::request::Parts, body: Incoming, head: Head) -> Result<(Answer, Upgrade), Later> {
    let declared = head.declared;
    let general = |run: &Arc<Run>, conn: &Arc<ConnState>, parts, body| -> Later {
        let (run, conn) = (run.clone(), conn.clone());
        Box::pin(async move { answer(&run, &conn, parts, body, head).await })
    };
    if !body.is_end_stream() {
        return Err(general(run, conn, parts, body));
    }
    let (handler, pool, route, params) = match route(run, &parts, head) {
        Err(a) => return Ok((a, None)),
        Ok((endpoint @ Endpoint::Http { handler, stream_body: false, pool }, route, params)) => {
            if too_large(run, endpoint, declared) {
                return Ok((canned(413, true), None));
            }
            (handler.clone(), *pool, route, params)
        }
        // WebSocket upgrades and bodies read in pieces: the general path (it routes again).
        Ok(_) => return Err(general(run, conn, parts, body)),
    };
    // Inline dispatch: the data is attached as the handle is made (one hold of the
    // registry's lock instead of two); it learns its handle there.
    let inline = run.dispatcher.is_inline();
    let mut data = request_data(run, conn, &parts, 0, route, &params, Bytes::new(), declared, 0, None);
    let id = registry::begin_here(run.server_id, inline.then_some(&mut data));
    let mut pending = Pending(id);
    // The request's map goes to the answer; the rest of the request is done with. Taken
    // apart rather than dropped whole: the empty map `take` would leave in its place owns
    // no memory, and dropping it walked its empty parts.
    let http::request::Parts { method, uri, headers, extensions, .. } = parts;
    crate::response::lend_map(headers);
    drop((method, uri, extensions));
    run.counters.active_requests.fetch_add(1, Relaxed);
    let active = ActiveNow(run);
    let here = registry::Here::enter(id);
    let refused = if inline {
        handler::invoke(run.server_id, &handler, &Request { data: data.clone() }, &run.log);
        None
    } else {
        // The data's handle was not known when it was built.
        if let Some(d) = Arc::get_mut(&mut data) {
            d.set_id(id);
        }
        dispatch(run, id, handler, data.clone(), pool)
    };
    if let Some(a) = here.leave() {
        // Only a claim puts an answer here: the request has left Pending for good.
        pending.0 = 0;
        RequestData::recycle(data);
        return Ok((a, None));
    }
    drop(data);
    if let Some(a) = refused {
        return Ok((a, None));
    }
    // Ended during the call without an answer (the monitor expired a blocking handler).
    let Some(mut rx) = registry::arm(id) else { return Ok((canned(503, false), None)) };
    if let Some(a) = now(&mut pending, &mut rx) {
        return Ok((a, None));
    }
    let (run, active) = (run.clone(), active.keep());
    Err(Box::pin(async move {
        let _active = active;
        (wait(&run, &mut pending, rx, None).await, None)
    }))
}

/// The checks and the routing every request goes through: the endpoint, its route
/// pattern and parameters, or the engine's answer.
fn route<'r>(run: &'r Run, parts: &http::request::Parts, head: Head) -> Result<(&'r Endpoint, &'r str, Vec<(String, String)>), Answer> {
    if !head.host_ok {
        return Err(canned(400, true));
    }
    // hyper counts HTTP/1 headers itself (431); HTTP/2 only limits the list's size.
    if parts.headers.len() > run.limits.max_headers {
        return Err(canned(431, true));
    }
    if let Some(a) = run.health.answer(&parts.method, parts.uri.path()) {
        return Err(a);
    }
    if let Some(a) = run.observe.as_ref().and_then(|o| o.metrics_answer(&parts.method, parts.uri.path(), &run.counters)) {
        return Err(a);
    }
    let upgrade = head.upgrade && crate::ws::wants_upgrade(&parts.headers);
    let (endpoint, route, params) = match run.router.find(&parts.method, parts.uri.path(), upgrade) {
        Match::Found { endpoint, route, params } => (endpoint, route, params),
        Match::NotFound => return Err(canned(404, false)),
        Match::MethodNotAllowed { allow } => {
            let mut a = canned(405, false);
            if let Ok(v) = HeaderValue::from_str(&allow) {
                a.headers.insert(ALLOW, v);
            }
            return Err(a);
        }
    };
    Ok((endpoint, route, params))
}

/// The body the request declares is over its route's limit: refused before reading
/// (413), and the connection closed so that the unread body is not taken as a request.
fn too_large(run: &Run, endpoint: &Endpoint, declared: Option<u64>) -> bool {
    let limit = match endpoint {
        Endpoint::Http { stream_body: true, .. } => run.limits.max_stream_body_bytes,
        _ => run.limits.max_body_bytes,
    };
    declared.is_some_and(|n| n > limit)
}

/// The request as the host reads it.
#[allow(clippy::too_many_arguments)]
fn request_data(
    run: &Run,
    conn: &ConnState,
    parts: &http::request::Parts,
    id: u64,
    route: &str,
    params: &[(String, String)],
    body: Bytes,
    declared: Option<u64>,
    flags: u32,
    budget: Option<BodyBudget>,
) -> Arc<RequestData> {
    let forwarded = crate::proxy::forwarded(conn.peer.ip(), &parts.headers, &run.trusted);
    let flags = flags | if conn.secure { FLAG_TLS } else { 0 };
    let data = RequestData::shared(Parts {
        id,
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parts.uri.query().unwrap_or(""),
        remote_addr: forwarded.as_ref().and_then(|f| f.0.as_deref()).unwrap_or(&conn.remote),
        scheme: forwarded.as_ref().and_then(|f| f.1).unwrap_or(conn.scheme),
        peer_addr: &conn.peer_text,
        route,
        headers: &parts.headers,
        params,
        body,
        http_version: match parts.version {
            Version::HTTP_10 => 10,
            Version::HTTP_2 => 20,
            _ => 11,
        },
        content_length: declared,
        flags,
    });
    RequestData::account(data, budget, crate::stats::Held::new(&run.counters))
}

/// Every request the fast path does not finish: the front's, those with a body, WebSocket
/// upgrades.
// Mutable for the WebSocket upgrade's extension.
#[cfg_attr(not(feature = "ws"), allow(unused_mut))]
async fn answer(run: &Arc<Run>, conn: &Arc<ConnState>, mut parts: http::request::Parts, body: Incoming, head: Head) -> (Answer, Upgrade) {
    let declared = head.declared;
    let (endpoint, route, params) = match route(run, &parts, head) {
        Ok((endpoint, route, params)) => (endpoint.clone(), route, params),
        Err(a) => return (a, None),
    };
    #[cfg(feature = "ws")]
    let ws_route = match &endpoint {
        Endpoint::WebSocket(r) => match ws::check_upgrade(&parts.method, parts.version, &parts.headers) {
            UpgradeCheck::Valid(_) if r.connections() >= run.limits.ws_max_connections => return (busy(), None),
            UpgradeCheck::Valid(accept) => Some((r.clone(), accept)),
            UpgradeCheck::NotUpgrade => return (upgrade_required(), None),
            UpgradeCheck::Bad(426, _) => return (upgrade_required(), None),
            UpgradeCheck::Bad(status, why) => {
                let mut a = canned(status, true);
                a.body = Bytes::from(format!("{status} {why}\n"));
                return (a, None);
            }
        },
        Endpoint::Http { .. } => None,
    };
    // No WebSocket route can be registered without the feature (`Server::route_to`).
    #[cfg(not(feature = "ws"))]
    let ws_route: Option<()> = None;
    if too_large(run, &endpoint, declared) {
        return (canned(413, true), None);
    }
    let stream_body = matches!(endpoint, Endpoint::Http { stream_body: true, .. });
    let mut budget = BodyBudget::new(conn);
    let (body, streamed) = if stream_body {
        (Bytes::new(), Some((body, Inbox::new())))
    } else {
        match body::read_all(body, &run.limits, &mut budget).await {
            Ok(b) => (b, None),
            Err(e) => return (e.answer(), None),
        }
    };
    let (id, rx) = registry::begin(run.server_id);
    let mut pending = Pending(id);
    let flags = if streamed.is_some() { FLAG_BODY_STREAMED } else { 0 } | if ws_route.is_some() { FLAG_WEBSOCKET } else { 0 };
    let data = request_data(run, conn, &parts, id, route, &params, body, declared, flags, Some(budget));
    run.counters.active_requests.fetch_add(1, Relaxed);
    let _active = ActiveRequest(run.clone());

    let inbox = streamed.map(|(incoming, inbox)| {
        let ex = Exchange::new(id, &run.dispatcher);
        let _ = ex.inbox.set(inbox.clone());
        registry::attach_exchange(id, ex.clone());
        tokio::spawn(pump_body(incoming, inbox.clone(), ex, run.clone()));
        inbox
    });

    let ws_conn = match (&endpoint, ws_route) {
        #[cfg(feature = "ws")]
        (Endpoint::WebSocket(_), Some((route, accept))) => {
            let mailbox = Mailbox::new(&run.dispatcher);
            let ws = WsConn::open(run.server_id, id, route, run.hub.clone(), mailbox.clone(), run.limits.ws_queue_bytes);
            registry::attach(id, data.clone(), true);
            // The open callback runs through the connection's mailbox, so that no message
            // callback can overtake it.
            let (on_open, ws_id, server_id, log) = (ws.route().on_open.clone(), ws.id, run.server_id, run.log.clone());
            let open: Handler = Arc::new(move |r: &Request| on_open(ws_id, r));
            let request = Request { data };
            mailbox.post(Box::new(move || handler::invoke(server_id, &open, &request, &log)));
            Some((ws, accept))
        }
        (Endpoint::Http { handler, pool, .. }, _) => {
            if let Some(a) = dispatch(run, id, handler.clone(), data, *pool) {
                return (a, None);
            }
            None
        }
        _ => None,
    };

    // Dropped while the open callback decides (client gone, stop): the handle ends.
    #[cfg(feature = "ws")]
    let _opening = ws_conn.as_ref().map(|(ws, _)| AbandonOnDrop(ws.clone()));
    #[cfg_attr(not(feature = "ws"), allow(unused_mut))]
    let mut answer = wait(run, &mut pending, rx, inbox.as_deref()).await;
    #[cfg(not(feature = "ws"))]
    let upgrade: Upgrade = ws_conn;
    #[cfg(feature = "ws")]
    let upgrade = match ws_conn {
        Some((ws, accept)) if answer.status == 101 => match parts.extensions.remove::<hyper::upgrade::OnUpgrade>() {
            Some(on_upgrade) => {
                ws::switching_headers(&mut answer.headers, accept);
                Some((ws, on_upgrade))
            }
            None => {
                ws.abandon();
                return (canned(500, true), None);
            }
        },
        Some((ws, _)) => {
            ws.abandon();
            None
        }
        None => None,
    };
    (answer, upgrade)
}

#[cfg(feature = "ws")]
struct AbandonOnDrop(Arc<WsConn>);

#[cfg(feature = "ws")]
impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

/// Hands a request to its handler (inline now, or queued for the pool). An answer when
/// the pool cannot take it.
fn dispatch(run: &Run, id: u64, handler: Handler, data: Arc<RequestData>, pool: bool) -> Option<Answer> {
    if run.dispatcher.is_inline() {
        registry::attach(id, data.clone(), true);
        handler::invoke(run.server_id, &handler, &Request { data }, &run.log);
        return None;
    }
    // A streamed body comes through this very connection, which cannot move while its
    // handler runs on it: a handler that reads it (blocking) goes to the pool.
    let streamed = data.info().flags & FLAG_BODY_STREAMED != 0;
    if let Some(slot) = (!streamed && !pool).then(|| run.dispatcher.try_inline()).flatten() {
        slot.running(id);
        registry::attach(id, data.clone(), true);
        // Likewise a streamed answer cannot drain while the handler holds the connection:
        // blocking waits refuse here (EMBER_ERR_STATE) as under inline dispatch.
        crate::inside::strict_io(|| handler::invoke(run.server_id, &handler, &Request { data }, &run.log));
        return None;
    }
    registry::attach(id, data, false);
    match run.dispatcher.submit(Job { handler, id }) {
        Submit::Queued => None,
        Submit::Full => {
            run.log.warn(&format!("request {id:#x}: all {} queue places for the pool are taken, answered 503", run.limits.max_queued));
            Some(busy())
        }
        Submit::Closed => Some(busy()),
    }
}

/// Moves a streamed body to its reader; over the limit, too slow or broken, the engine
/// answers (413, 408, 400) unless the host already did, in which case a streamed answer
/// is cut.
async fn pump_body(incoming: Incoming, inbox: Arc<Inbox>, ex: Arc<Exchange>, run: Arc<Run>) {
    let Some(error) = inbox::pump(incoming, inbox.clone(), ex.clone(), run.limits.clone()).await else { return };
    let (status, kind) = match error {
        InError::TooLarge => (413, ErrorKind::TooLarge),
        InError::TooSlow => (408, ErrorKind::TimedOut),
        // Broken framing or a reset: as for a buffered body, 400 and the connection closed.
        InError::Gone => (400, ErrorKind::ClientGone),
    };
    // Like an expiry: the host's later calls on the handle report why, and its views stay
    // valid until then.
    if registry::refuse(ex.id, kind, canned(status, true)).is_err() {
        if let Some(out) = ex.outbox.get() {
            out.close();
        }
        inbox.fail_reader(error, &ex);
        return;
    }
    inbox.fail_reader(error, &ex);
    ex.fire(Event::Aborted);
}

/// The pool's queue is full (or the pool is gone): the client may try again shortly.
fn busy() -> Answer {
    let mut a = canned(503, false);
    a.headers.insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    a
}

#[cfg(feature = "ws")]
/// A plain request to a WebSocket route, or an unsupported WebSocket version.
fn upgrade_required() -> Answer {
    let mut a = canned(426, false);
    a.headers.insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
    a.headers.insert(http::header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
    a
}

struct ActiveRequest(Arc<Run>);

/// `ActiveRequest` while the request is handled within hyper's call: no reference taken
/// unless it has to wait.
struct ActiveNow<'a>(&'a Arc<Run>);

impl ActiveNow<'_> {
    fn keep(self) -> ActiveRequest {
        let active = ActiveRequest(self.0.clone());
        std::mem::forget(self);
        active
    }
}

impl Drop for ActiveNow<'_> {
    fn drop(&mut self) {
        self.0.counters.active_requests.fetch_sub(1, Relaxed);
    }
}

impl Drop for ActiveRequest {
    fn drop(&mut self) {
        self.0.counters.active_requests.fetch_sub(1, Relaxed);
    }
}
