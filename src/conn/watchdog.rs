//! Decides, from the connection's counters and flags, when a connection has waited too
//! long: a request head that does not finish (408), an idle keep-alive connection, a
//! peer that stopped reading what we send.

use crate::config::Limits;
use crate::connstate::ConnState;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

static EPOCH: once_cell::sync::Lazy<Instant> = once_cell::sync::Lazy::new(Instant::now);

fn now_ms() -> u64 {
    EPOCH.elapsed().as_millis() as u64 + 1
}

/// The watchdog's own view of time for one connection.
pub(crate) struct Clock {
    events: u64,
    requests: u64,
    last_activity: u64,
    head_since: Option<u64>,
    unsent: u32,
    /// HTTP/2: since when answer bytes wait for the peer's window, and the DATA frames
    /// written then.
    stalled_since: Option<u64>,
    data_frames: u64,
    flood: Flood,
}

/// A leaky bucket of the HTTP/2 control frames a peer sent (`ConnState::h2_control_frames`).
/// It drains with time and with useful work: requests started and DATA frames written
/// (each of which a client may answer with WINDOW_UPDATEs).
#[derive(Default)]
struct Flood {
    level: u64,
    at: u64,
    control: u64,
    requests: u64,
    data_frames: u64,
}

/// Control frames a peer may have outstanding in the bucket; a flood passes it in
/// milliseconds, a real client (a PING a second, WINDOW_UPDATEs for what it reads, a
/// PRIORITY per request) never comes near.
const FLOOD_LIMIT: u64 = 10_000;
const FLOOD_DRAIN_PER_S: u64 = 100;
const FLOOD_CREDIT_PER_REQUEST: u64 = 8;
const FLOOD_CREDIT_PER_DATA_FRAME: u64 = 4;

impl Clock {
    pub fn new() -> Clock {
        Clock { events: 0, requests: 0, last_activity: now_ms(), head_since: None, unsent: 0, stalled_since: None, data_frames: 0, flood: Flood::default() }
    }

    /// Notes the bytes waiting in the socket's send queue; true if that changed.
    pub fn note_unsent(&mut self, queued: u32) -> bool {
        std::mem::replace(&mut self.unsent, queued) != queued
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Look again in this many ms.
    Wait(u64),
    /// Nothing is in progress: let the protocol end it politely (HTTP/2 GOAWAY).
    Idle,
    /// Cut it now.
    Close,
    /// An HTTP/1 request head did not arrive in time.
    Timeout408,
    /// An HTTP/2 peer floods the connection with control frames: cut it.
    Flood,
}

/// How often the watchdog looks even when nothing is due: state changes (a request
/// ends, bytes arrive) do not wake it.
pub(crate) fn tick(limits: &Limits) -> u64 {
    let shortest = [limits.header_timeout, limits.idle_timeout]
        .iter()
        .filter(|d| !d.is_zero())
        .map(|d| d.as_millis() as u64)
        .min()
        .unwrap_or(4000);
    (shortest / 4).clamp(25, 1000)
}

pub(crate) fn check(state: &ConnState, clock: &mut Clock, limits: &Limits) -> Verdict {
    let (header_ms, idle_ms) = (limits.header_timeout.as_millis() as u64, limits.idle_timeout.as_millis() as u64);
    let now = now_ms();
    let events = state.events.load(Relaxed);
    if events != clock.events {
        clock.events = events;
        clock.last_activity = now;
    }
    let requests = state.requests.load(Relaxed);
    if requests != clock.requests {
        // A request started since the last look: any head seen pending then is done.
        clock.requests = requests;
        clock.head_since = None;
    }
    if state.write_blocked.load(Relaxed) {
        // Answer bytes wait for a peer that does not read them. Progress of any kind
        // counts as activity; none for the idle timeout cuts the connection.
        clock.head_since = None;
        if idle_ms == 0 {
            return Verdict::Wait(3_600_000);
        }
        let due = clock.last_activity + idle_ms;
        return if now >= due { Verdict::Close } else { Verdict::Wait(due - now) };
    }
    if stalled(state, clock, now, idle_ms) {
        return Verdict::Close;
    }
    if flooding(state, &mut clock.flood, now) {
        return Verdict::Flood;
    }
    if state.in_flight.load(Relaxed) > 0 {
        // A handler or a streamed answer is at work; the handler timeout and the body
        // rate limit look after those.
        clock.head_since = None;
        return Verdict::Wait(idle_ms.max(1000));
    }
    if state.head_pending.load(Relaxed) && header_ms > 0 {
        let due = *clock.head_since.get_or_insert(now) + header_ms;
        if now < due {
            return Verdict::Wait(due - now);
        }
        // HTTP/2 frames that start no request (a HEADERS block never finished, or
        // anything else) get no 408: the connection is ended politely.
        return if state.is_h2.load(Relaxed) { Verdict::Idle } else { Verdict::Timeout408 };
    }
    clock.head_since = None;
    // A connection that never sent a byte gets the header timeout, not the idle one.
    let limit = if !state.started.load(Relaxed) && header_ms > 0 { header_ms } else { idle_ms };
    if limit == 0 {
        return Verdict::Wait(3_600_000);
    }
    let due = clock.last_activity + limit;
    if now >= due { Verdict::Idle } else { Verdict::Wait(due - now) }
}

/// HTTP/2: answers wait for a flow-control window the peer does not open (more streams
/// are sending than answers are waiting for their host), and no DATA frame went out for
/// the idle timeout. What a full socket is to HTTP/1, a closed window is to HTTP/2; the
/// peer may well go on sending PINGs meanwhile.
fn stalled(state: &ConnState, clock: &mut Clock, now: u64, idle_ms: u64) -> bool {
    if idle_ms == 0 || !state.is_h2.load(Relaxed) || state.h2_sending.load(Relaxed) <= state.h2_idle_bodies.load(Relaxed) {
        clock.stalled_since = None;
        return false;
    }
    let frames = state.h2_data_frames.load(Relaxed);
    if clock.stalled_since.is_none() || frames != clock.data_frames {
        clock.data_frames = frames;
        clock.stalled_since = Some(now);
    }
    clock.stalled_since.is_some_and(|since| now >= since + idle_ms)
}

fn flooding(state: &ConnState, f: &mut Flood, now: u64) -> bool {
    if !state.is_h2.load(Relaxed) {
        return false;
    }
    let control = state.h2_control_frames.load(Relaxed);
    if control == f.control {
        return false;
    }
    let (requests, data_frames) = (state.requests.load(Relaxed), state.h2_data_frames.load(Relaxed));
    let credit = (now.saturating_sub(f.at) * FLOOD_DRAIN_PER_S / 1000)
        .saturating_add((requests - f.requests).saturating_mul(FLOOD_CREDIT_PER_REQUEST))
        .saturating_add((data_frames - f.data_frames).saturating_mul(FLOOD_CREDIT_PER_DATA_FRAME));
    f.level = (f.level + (control - f.control)).saturating_sub(credit);
    *f = Flood { level: f.level, at: now, control, requests, data_frames };
    f.level > FLOOD_LIMIT
}
