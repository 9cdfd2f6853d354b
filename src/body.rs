//! Reading a request body into memory under three limits: its size, a minimum data
//! rate once a grace period has passed (a trickling client cannot hold a connection),
//! and the connection's budget of buffered body bytes (HTTP/2 multiplexes many bodies).

use crate::config::Limits;
use crate::connstate::BodyBudget;
use crate::request::Answer;
use crate::response::canned;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::{Body, Incoming};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// Over `max_body_bytes`: 413.
    TooLarge,
    /// Slower than `min_body_rate` after the grace period: 408.
    TooSlow,
    /// The connection holds too many body bytes already: 503.
    Busy,
    /// Broken framing or a reset stream: 400.
    Bad,
}

impl BodyError {
    /// The engine's answer; the connection closes, since the rest of the body is unread.
    pub fn answer(&self) -> Answer {
        match self {
            BodyError::TooLarge => canned(413, true),
            BodyError::TooSlow => canned(408, true),
            BodyError::Busy => canned(503, true),
            BodyError::Bad => canned(400, true),
        }
    }
}

pub(crate) async fn read_all(mut body: Incoming, limits: &Limits, budget: &mut BodyBudget) -> Result<Bytes, BodyError> {
    if body.is_end_stream() {
        return Ok(Bytes::new());
    }
    let max = limits.max_body_bytes;
    let conn_max = limits.max_conn_body_bytes.max(max);
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut total: u64 = 0;
    let start = Instant::now();
    let mut rate_check = (limits.min_body_rate > 0).then(|| {
        tokio::time::interval_at(start + limits.body_rate_grace, Duration::from_secs(1))
    });
    loop {
        let next = tokio::select! {
            frame = body.frame() => frame,
            _ = tick(&mut rate_check) => {
                let elapsed_ms = start.elapsed().as_millis() as u64;
                if total.saturating_mul(1000) < limits.min_body_rate.saturating_mul(elapsed_ms) {
                    return Err(BodyError::TooSlow);
                }
                continue;
            }
        };
        let frame = match next {
            None => break,
            Some(Ok(frame)) => frame,
            Some(Err(_)) => return Err(BodyError::Bad),
        };
        let Ok(data) = frame.into_data() else { continue };
        total += data.len() as u64;
        if total > max {
            return Err(BodyError::TooLarge);
        }
        if !budget.take(data.len() as u64, conn_max) {
            return Err(BodyError::Busy);
        }
        chunks.push(data);
    }
    Ok(match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.pop().unwrap_or_default(),
        _ => {
            let mut all = BytesMut::with_capacity(total as usize);
            for c in chunks {
                all.extend_from_slice(&c);
            }
            all.freeze()
        }
    })
}

async fn tick(check: &mut Option<tokio::time::Interval>) {
    match check {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}
