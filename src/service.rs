//! One request: limits, routing, handing it to the host, waiting for the answer.

use crate::body;
use crate::connstate::{BodyBudget, ConnState, InFlight};
use crate::dispatch::Job;
use crate::engine::{Run, Target};
use crate::handler::{self, Request};
use crate::registry;
use crate::reply::Reply;
use crate::request::{Answer, Parts, RequestData};
use crate::response::canned;
use crate::router::Match;
use http::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH};
use http::{Method, Version};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::sync::oneshot;

pub(crate) async fn handle(run: Arc<Run>, conn: Arc<ConnState>, req: http::Request<Incoming>) -> Result<http::Response<Reply>, Infallible> {
    let bodiless = !req.headers().contains_key(http::header::TRANSFER_ENCODING)
        && req.headers().get(CONTENT_LENGTH).is_none_or(|v| v.as_bytes() == b"0");
    let in_flight = conn.request_started(bodiless);
    run.counters.requests.fetch_add(1, Relaxed);
    let head_only = req.method() == Method::HEAD;
    let is_h2 = req.version() == Version::HTTP_2;
    let answer = answer(&run, &conn, req).await;
    run.counters.status(answer.status);
    Ok(to_response(answer, head_only, is_h2, in_flight))
}

async fn answer(run: &Arc<Run>, conn: &Arc<ConnState>, req: http::Request<Incoming>) -> Answer {
    let (parts, body) = req.into_parts();
    if !host_header_ok(&parts) {
        return canned(400, true);
    }
    // hyper counts HTTP/1 headers itself (431); HTTP/2 only limits the list's size.
    if parts.headers.len() > run.limits.max_headers {
        return canned(431, true);
    }
    let (handler, route, params) = match run.router.find(&parts.method, parts.uri.path()) {
        Match::Found { handler, route, params } => (handler.clone(), route, params),
        Match::NotFound => return canned(404, false),
        Match::MethodNotAllowed { allow } => {
            let mut a = canned(405, false);
            if let Ok(v) = HeaderValue::from_str(&allow) {
                a.headers.insert(ALLOW, v);
            }
            return a;
        }
    };
    let declared = parts.headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > run.limits.max_body_bytes) {
        // Refuse before reading; closing keeps the unread body from being taken as a request.
        return canned(413, true);
    }
    let mut budget = BodyBudget::new(conn.clone());
    let body = match body::read_all(body, &run.limits, &mut budget).await {
        Ok(b) => b,
        Err(e) => return e.answer(),
    };
    let (id, rx) = registry::begin(run.server_id);
    let pending = Pending(id);
    let data = Arc::new(
        RequestData::new(Parts {
            id,
            method: parts.method.as_str(),
            path: parts.uri.path(),
            query: parts.uri.query().unwrap_or(""),
            remote_addr: &conn.remote,
            route,
            headers: &parts.headers,
            params: &params,
            body,
            http_version: match parts.version {
                Version::HTTP_10 => 10,
                Version::HTTP_2 => 20,
                _ => 11,
            },
        })
        .with_accounting(budget, crate::stats::Held::new(&run.counters)),
    );
    run.counters.active_requests.fetch_add(1, Relaxed);
    let _active = ActiveRequest(run.clone());
    match &run.target {
        Target::Inline => {
            registry::attach(id, data.clone(), true);
            handler::invoke(run.server_id, &handler, &Request { data }, &run.log);
        }
        Target::Pool(tx) => {
            registry::attach(id, data, false);
            if let Err(e) = tx.try_send(Job { handler, id }) {
                if e.is_full() {
                    run.log.warn(&format!("request {id:#x}: all {} queue places for the pool are taken, answered 503", run.limits.max_queued));
                }
                return busy();
            }
        }
    }
    wait(run, pending, rx).await
}

/// The pool's queue is full (or the pool is gone): the client may try again shortly.
fn busy() -> Answer {
    let mut a = canned(503, false);
    a.headers.insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    a
}

async fn wait(run: &Run, pending: Pending, mut rx: oneshot::Receiver<Answer>) -> Answer {
    if let Ok(a) = rx.try_recv() {
        return a;
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
    outcome.unwrap_or_else(|| canned(503, false))
}

/// RFC 9112 §3.2: an HTTP/1.1 request carries exactly one Host header, HTTP/1.0 at most one.
fn host_header_ok(parts: &http::request::Parts) -> bool {
    let hosts = parts.headers.get_all(http::header::HOST).iter().count();
    if parts.version == Version::HTTP_11 { hosts == 1 } else { hosts <= 1 }
}

/// Ends the request in the registry if this future is dropped first (client gone, stop).
struct Pending(u64);

impl Drop for Pending {
    fn drop(&mut self) {
        registry::expire(self.0, false);
    }
}

struct ActiveRequest(Arc<Run>);

impl Drop for ActiveRequest {
    fn drop(&mut self) {
        self.0.counters.active_requests.fetch_sub(1, Relaxed);
    }
}

fn to_response(answer: Answer, head_only: bool, is_h2: bool, in_flight: InFlight) -> http::Response<Reply> {
    let Answer { status, mut headers, body, declared_len } = answer;
    if is_h2 {
        // Connection-specific headers are forbidden in HTTP/2 (RFC 9113 §8.2.2).
        headers.remove(CONNECTION);
    }
    let body = if head_only {
        // HTTP/2 would send a HEAD body as given; the length still tells the client the
        // size. A host answering HEAD itself may state the size of what GET would send.
        let len = match declared_len {
            Some(n) if body.is_empty() => n,
            _ => body.len() as u64,
        };
        headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
        bytes::Bytes::new()
    } else {
        body
    };
    let mut resp = http::Response::new(Reply::full(body, Some(in_flight)));
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    *resp.headers_mut() = headers;
    resp
}
