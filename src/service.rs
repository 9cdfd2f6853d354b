//! One request: limits, routing, the body (whole, or streamed to the host), handing it to
//! the host, waiting for the answer (whole, streamed, or a WebSocket accept).

use crate::body;
use crate::connstate::{BodyBudget, ConnState, InFlight};
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
use crate::reply::Reply;
use crate::request::{Answer, Parts, RequestData};
use crate::response::canned;
use crate::router::{Endpoint, Match};
use crate::stream::StreamBody;
#[cfg(feature = "ws")]
use crate::ws::{self, UpgradeCheck, WsConn};
use bytes::Bytes;
use http::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH};
use http::{Method, Version};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::sync::oneshot;

/// `ember_request_info.flags`: the body is read with `ember_request_read`.
pub const FLAG_BODY_STREAMED: u32 = 1;
/// `ember_request_info.flags`: a WebSocket upgrade request.
pub const FLAG_WEBSOCKET: u32 = 2;
/// `ember_request_info.flags`: the request came over TLS.
pub const FLAG_TLS: u32 = 4;

pub(crate) async fn handle(run: Arc<Run>, conn: Arc<ConnState>, req: http::Request<Incoming>) -> Result<http::Response<Reply>, Infallible> {
    // Looked up once: whether the request has a body, and the length it declares.
    let length = req.headers().get(CONTENT_LENGTH);
    let bodiless = !req.headers().contains_key(http::header::TRANSFER_ENCODING) && length.is_none_or(|v| v.as_bytes() == b"0");
    let declared = length.and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let begun = run.observe.as_ref().map(|o| o.begin(&req, &conn));
    let mut in_flight = conn.request_started(bodiless);
    run.counters.requests.fetch_add(1, Relaxed);
    let head_only = req.method() == Method::HEAD;
    let is_h2 = req.version() == Version::HTTP_2;
    // Without a front (nothing configured) its futures are never built: each one built is
    // a state copied into this future's, and that copying was the path's largest memcpy.
    let (mut answer, upgrade) = if run.front.is_none() {
        let (mut a, upgrade) = answer(&run, &conn, req, declared).await;
        front::strip_marker(&mut a);
        (a, upgrade)
    } else {
        match front::enter(&run, &conn, &req).await {
            front::Entry::Answered(a) => (a, None),
            front::Entry::Pass(ctx) => {
                let (a, upgrade) = answer(&run, &conn, req, declared).await;
                (front::leave(ctx, a).await, upgrade)
            }
        }
    };
    run.counters.status(answer.status);
    if run.health.is_draining() && !is_h2 && upgrade.is_none() {
        // Keep-alive clients (a proxy's upstream pool) reconnect, to another process.
        answer.headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    if let Some(upgrade) = upgrade {
        start_ws(&run, &conn, upgrade);
    }
    if let (Some(o), Some(b)) = (&run.observe, begun) {
        in_flight.observed = Some(o.observed(b, answer.status));
    }
    Ok(to_response(answer, head_only, is_h2, in_flight))
}

#[cfg(feature = "ws")]
type Upgrade = Option<(Arc<WsConn>, hyper::upgrade::OnUpgrade)>;
/// Without the `ws` feature no WebSocket route exists, so no upgrade is ever taken.
#[cfg(not(feature = "ws"))]
type Upgrade = Option<Infallible>;

#[cfg(feature = "ws")]
fn start_ws(run: &Arc<Run>, conn: &Arc<ConnState>, (ws, on_upgrade): (Arc<WsConn>, hyper::upgrade::OnUpgrade)) {
    let limits = ws::WsLimits {
        max_message: run.limits.ws_max_message_bytes,
        ping_interval: run.limits.ws_ping_interval,
        stall: run.limits.idle_timeout.max(std::time::Duration::from_secs(1)),
    };
    tokio::spawn(ws::run(ws, on_upgrade, limits, run.shutdown.clone(), conn.clone()));
}

#[cfg(not(feature = "ws"))]
fn start_ws(_: &Arc<Run>, _: &Arc<ConnState>, never: Infallible) {
    match never {}
}

/// `declared`: the request's Content-Length.
async fn answer(run: &Arc<Run>, conn: &Arc<ConnState>, req: http::Request<Incoming>, declared: Option<u64>) -> (Answer, Upgrade) {
    // Mutable for the WebSocket upgrade's extension.
    #[cfg_attr(not(feature = "ws"), allow(unused_mut))]
    let (mut parts, body) = req.into_parts();
    if !host_header_ok(&parts) {
        return (canned(400, true), None);
    }
    // hyper counts HTTP/1 headers itself (431); HTTP/2 only limits the list's size.
    if parts.headers.len() > run.limits.max_headers {
        return (canned(431, true), None);
    }
    if let Some(a) = run.health.answer(&parts.method, parts.uri.path()) {
        return (a, None);
    }
    if let Some(a) = run.observe.as_ref().and_then(|o| o.metrics_answer(&parts.method, parts.uri.path(), &run.counters)) {
        return (a, None);
    }
    let upgrade = crate::ws::wants_upgrade(&parts.headers);
    let (endpoint, route, params) = match run.router.find(&parts.method, parts.uri.path(), upgrade) {
        Match::Found { endpoint, route, params } => (endpoint.clone(), route, params),
        Match::NotFound => return (canned(404, false), None),
        Match::MethodNotAllowed { allow } => {
            let mut a = canned(405, false);
            if let Ok(v) = HeaderValue::from_str(&allow) {
                a.headers.insert(ALLOW, v);
            }
            return (a, None);
        }
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
    let stream_body = matches!(endpoint, Endpoint::Http { stream_body: true, .. });
    let body_limit = if stream_body { run.limits.max_stream_body_bytes } else { run.limits.max_body_bytes };
    if declared.is_some_and(|n| n > body_limit) {
        // Refuse before reading; closing keeps the unread body from being taken as a request.
        return (canned(413, true), None);
    }
    let mut budget = BodyBudget::new(conn);
    let (body, streamed) = if stream_body {
        (Bytes::new(), Some((body, Inbox::new())))
    } else {
        match body::read_all(body, &run.limits, &mut budget).await {
            Ok(b) => (b, None),
            Err(e) => return (e.answer(), None),
        }
    };
    let forwarded = crate::proxy::forwarded(conn.peer.ip(), &parts.headers, &run.trusted);
    let (id, rx) = registry::begin(run.server_id);
    let mut pending = Pending(id);
    let flags = if streamed.is_some() { FLAG_BODY_STREAMED } else { 0 } | if ws_route.is_some() { FLAG_WEBSOCKET } else { 0 }
        | if conn.secure { FLAG_TLS } else { 0 };
    let data = Arc::new(
        RequestData::new(Parts {
            id,
            method: parts.method.as_str(),
            path: parts.uri.path(),
            query: parts.uri.query().unwrap_or(""),
            remote_addr: forwarded.as_ref().and_then(|f| f.0.as_deref()).unwrap_or(&conn.remote),
            scheme: forwarded.as_ref().and_then(|f| f.1).unwrap_or(conn.scheme),
            peer_addr: &conn.peer_text,
            route,
            headers: &parts.headers,
            params: &params,
            body,
            http_version: match parts.version {
                Version::HTTP_10 => 10,
                Version::HTTP_2 => 20,
                _ => 11,
            },
            content_length: declared,
            flags,
        })
        .with_accounting(budget, crate::stats::Held::new(&run.counters)),
    );
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

async fn wait(run: &Run, pending: &mut Pending, mut rx: oneshot::Receiver<Answer>, inbox: Option<&Inbox>) -> Answer {
    match rx.try_recv() {
        Ok(a) => {
            // The sender went through a claim: the request has left Pending for good
            // (answered, streaming or refused), so the expiry on drop would change nothing.
            pending.0 = 0;
            return a;
        }
        // Ended already (the monitor expired a handler that blocked inline): a polled
        // finished receiver would panic.
        Err(oneshot::error::TryRecvError::Closed) => return canned(503, false),
        Err(oneshot::error::TryRecvError::Empty) => {}
    }
    // A handler reading its body in pieces gets the handler timeout once the body is in.
    if let Some(inbox) = inbox {
        tokio::select! {
            a = &mut rx => {
                if a.is_ok() {
                    pending.0 = 0;
                }
                return a.unwrap_or_else(|_| canned(503, false));
            }
            _ = inbox.wait_finished() => {}
        }
    }
    let limit = run.limits.handler_timeout;
    let outcome = if limit.is_zero() {
        (&mut rx).await.ok()
    } else {
        match tokio::time::timeout(limit, &mut rx).await {
            Ok(r) => r.ok(),
            Err(_) if registry::expire(pending.0, true) => {
                run.log.warn(&format!("request {:#x}: no answer within {} ms, answered 503", pending.0, limit.as_millis()));
                None
            }
            // The host claimed the answer just before the timeout: it is on its way, and
            // the host was told it got through, so it is the one sent.
            Err(_) => rx.await.ok(),
        }
    };
    if outcome.is_some() {
        pending.0 = 0;
    }
    outcome.unwrap_or_else(|| canned(503, false))
}

/// RFC 9112 §3.2: an HTTP/1.1 request carries exactly one Host header, HTTP/1.0 at most one.
fn host_header_ok(parts: &http::request::Parts) -> bool {
    host_ok(parts.version, &parts.headers)
}

pub(crate) fn host_ok(version: Version, headers: &http::HeaderMap) -> bool {
    let hosts = headers.get_all(http::header::HOST).iter().count();
    if version == Version::HTTP_11 { hosts == 1 } else { hosts <= 1 }
}

/// Ends the request in the registry if this future is dropped first (client gone, stop).
/// 0 once an answer came through, which can only follow a claim: nothing left to end.
struct Pending(u64);

impl Drop for Pending {
    fn drop(&mut self) {
        if self.0 != 0 {
            registry::expire(self.0, false);
        }
    }
}

struct ActiveRequest(Arc<Run>);

impl Drop for ActiveRequest {
    fn drop(&mut self) {
        self.0.counters.active_requests.fetch_sub(1, Relaxed);
    }
}

fn to_response(answer: Answer, head_only: bool, is_h2: bool, in_flight: InFlight) -> http::Response<Reply> {
    let Answer { status, mut headers, body, declared_len, ex, streamed, file } = answer;
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
    *resp.headers_mut() = headers;
    resp
}
