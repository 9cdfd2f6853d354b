//! The table of requests waiting for an answer. A handle is a token, not a pointer:
//! (generation << 32) | (shard << 24) | index. A handle that was answered, timed out, or
//! whose client left is recognised as such; one whose slot was reused is "invalid". No
//! path through here can touch freed memory, whatever integer the host passes.

use crate::error::{Error, ErrorKind, Result};
use crate::exchange::Exchange;
use crate::request::{Answer, RequestData};
use parking_lot::{Mutex, MutexGuard};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::oneshot;

mod errors;
mod here;
use errors::{invalid, not_pending};
pub(crate) use here::Here;

const SHARDS: usize = 16;
const INDEX_BITS: u32 = 24;
/// Finished slots wait this long in the free queue before reuse, so a late second answer
/// still gets a precise error instead of "invalid handle".
const REUSE_AFTER: usize = 1024;

enum State {
    /// `seen`: the host was handed the handle (its handler ran or is running). Until then
    /// the host cannot hold the handle, so an expiry frees everything at once.
    Pending { tx: Option<oneshot::Sender<Answer>>, data: Option<Arc<RequestData>>, seen: bool },
    /// The answer is being streamed; the host writes until it ends it.
    Streaming { data: Option<Arc<RequestData>> },
    Answered,
    TimedOut(Option<Arc<RequestData>>),
    Gone(Option<Arc<RequestData>>),
    /// The engine answered for the host: a streamed body over the limit (413,
    /// `TooLarge`) or too slow (408, `TimedOut`).
    Refused(ErrorKind, Option<Arc<RequestData>>),
}

struct Slot {
    generation: u32,
    server: u64,
    state: State,
    /// The answer's receiver when a claim had to make the channel (begun `here`, answered
    /// from elsewhere): the slot is reused only once `arm` took it.
    /// True: the claim was a whole answer, whose slot `arm` frees (a streamed one is
    /// freed by its end).
    parked: Option<(oneshot::Receiver<Answer>, bool)>,
    /// Events, a streamed answer or body: made only when the request needs them.
    ex: Option<Arc<Exchange>>,
}

#[derive(Default)]
struct Shard {
    slots: Vec<Slot>,
    free: VecDeque<u32>,
}

struct Table {
    shards: Vec<Mutex<Shard>>,
    next: AtomicUsize,
}

static TABLE: once_cell::sync::Lazy<Table> = once_cell::sync::Lazy::new(|| Table {
    shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
    next: AtomicUsize::new(0),
});

fn split(id: u64) -> Option<(usize, usize, u32)> {
    let generation = (id >> 32) as u32;
    let shard = ((id >> INDEX_BITS) & 0xff) as usize;
    let index = (id & ((1 << INDEX_BITS) - 1)) as usize;
    (generation != 0 && shard < SHARDS).then_some((shard, index, generation))
}

/// A handle's slot, its shard locked: the one place a handle is turned into its slot
/// (split, shard, generation check). Slots never move while the shard is locked.
struct Live {
    shard: MutexGuard<'static, Shard>,
    index: usize,
}

impl Live {
    #[inline]
    fn slot(&mut self) -> &mut Slot {
        // SAFETY: `live_slot` checked the index, and slots are only ever pushed (never
        // removed) while their shard is locked, which it is for this value's life.
        unsafe { self.shard.slots.get_unchecked_mut(self.index) }
    }

    /// The slot goes to the free queue (reused after `REUSE_AFTER` others).
    fn free(&mut self) {
        let index = self.index as u32;
        self.shard.free.push_back(index);
    }
}

/// The live slot of `id`, or `InvalidHandle` for a handle this library did not issue or
/// whose slot was reused.
#[inline]
fn live_slot(id: u64) -> Result<Live> {
    found(id).ok_or_else(|| invalid(id))
}

#[inline]
fn found(id: u64) -> Option<Live> {
    let (shard_no, index, generation) = split(id)?;
    let shard = TABLE.shards[shard_no].lock();
    match shard.slots.get(index) {
        Some(slot) if slot.generation == generation => Some(Live { shard, index }),
        _ => None,
    }
}

/// Reserves a slot for one of `server`'s requests; the answer arrives on the receiver.
pub(crate) fn begin(server: u64) -> (u64, oneshot::Receiver<Answer>) {
    let (tx, rx) = oneshot::channel();
    (reserve(server, Some(tx), None), rx)
}

/// Reserves a slot for a request whose handler is about to be called on this thread
/// (under a `Here`): an answer given during the call comes back through `Here::leave`;
/// otherwise `arm` makes the channel. `data`, fresh and held by the caller alone: the
/// request's data, given its handle and attached as seen by the host (inline dispatch,
/// whose handler runs next), in the same hold of the lock.
pub(crate) fn begin_here(server: u64, data: Option<&mut Arc<RequestData>>) -> u64 {
    reserve(server, None, data)
}

fn reserve(server: u64, tx: Option<oneshot::Sender<Answer>>, data: Option<&mut Arc<RequestData>>) -> u64 {
    let shard_no = TABLE.next.fetch_add(1, Ordering::Relaxed) % SHARDS;
    let mut shard = TABLE.shards[shard_no].lock();
    let state = State::Pending { tx, data: None, seen: false };
    let index = if shard.free.len() > REUSE_AFTER || shard.slots.len() >= (1 << INDEX_BITS) {
        let index = shard.free.pop_front().expect("free queue is not empty");
        let slot = &mut shard.slots[index as usize];
        slot.generation = slot.generation.wrapping_add(1).max(1);
        slot.state = state;
        slot.server = server;
        slot.ex = None;
        slot.parked = None;
        index
    } else {
        shard.slots.push(Slot { generation: 1, server, state, parked: None, ex: None });
        (shard.slots.len() - 1) as u32
    };
    let slot = &mut shard.slots[index as usize];
    let id = (slot.generation as u64) << 32 | (shard_no as u64) << INDEX_BITS | index as u64;
    if let Some(data) = data {
        Arc::get_mut(data).expect("fresh request data is held by its builder alone").set_id(id);
        slot.state = State::Pending { tx: None, data: Some(data.clone()), seen: true };
    }
    id
}

/// After the call of a request begun `here` that did not answer during it: the receiver
/// of its answer, or None when it ended without one (the monitor expired it).
pub(crate) fn arm(id: u64) -> Option<oneshot::Receiver<Answer>> {
    let mut live = found(id)?;
    let slot = live.slot();
    if let Some((rx, free)) = slot.parked.take() {
        if free {
            live.free();
        }
        return Some(rx);
    }
    match &mut slot.state {
        State::Pending { tx: tx @ None, .. } => {
            let (sender, rx) = oneshot::channel();
            *tx = Some(sender);
            Some(rx)
        }
        _ => None,
    }
}

/// Makes the request's data readable through its handle. `seen`: the handler is about
/// to run on this thread (inline dispatch).
pub(crate) fn attach(id: u64, request: Arc<RequestData>, seen: bool) {
    with_slot(id, |slot| {
        if let State::Pending { data, seen: s, .. } = &mut slot.state {
            *data = Some(request);
            *s = seen;
        }
        Ok(())
    })
    .ok();
}

/// Gives a request its exchange up front (routes that stream their body).
pub(crate) fn attach_exchange(id: u64, ex: Arc<Exchange>) {
    with_slot(id, |slot| {
        slot.ex = Some(ex);
        Ok(())
    })
    .ok();
}

/// Hands a queued request to a pool thread: its data, marked as seen by the host, or
/// None when it ended while it waited (client gone, timeout, stop).
pub(crate) fn deliver(id: u64) -> Option<Arc<RequestData>> {
    with_slot(id, |slot| match &mut slot.state {
        State::Pending { data: Some(d), seen, .. } => {
            *seen = true;
            Ok(d.clone())
        }
        _ => Err(invalid(id)),
    })
    .ok()
}

fn with_slot<T>(id: u64, f: impl FnOnce(&mut Slot) -> Result<T>) -> Result<T> {
    f(live_slot(id)?.slot())
}

/// The request's data while the host may still use it (waiting for its answer, or
/// streaming it).
pub(crate) fn data(id: u64) -> Result<Arc<RequestData>> {
    with_slot(id, |slot| match &slot.state {
        State::Pending { data: Some(d), .. } | State::Streaming { data: Some(d) } => Ok(d.clone()),
        state => Err(not_pending(id, state)),
    })
}

/// The request's exchange, made on first use, while the request is waiting or streaming.
/// A request that ended without the host reports why (and releases its data: the host
/// has been told).
pub(crate) fn exchange(id: u64) -> Result<Arc<Exchange>> {
    let mut live = live_slot(id)?;
    let slot = live.slot();
    match &slot.state {
        State::Pending { .. } | State::Streaming { .. } => {}
        _ => {
            let err = not_pending(id, &slot.state);
            if acknowledge(slot) {
                live.free();
            }
            return Err(err);
        }
    }
    if let Some(ex) = &slot.ex {
        return Ok(ex.clone());
    }
    let dispatcher = crate::exchange::dispatcher_of(slot.server)
        .ok_or_else(|| Error::new(ErrorKind::ClientGone, format!("request {id:#x}: the server stopped")))?;
    let ex = Exchange::new(id, &dispatcher);
    slot.ex = Some(ex.clone());
    Ok(ex)
}

/// The host learned that its request ended without it: release what was kept for it.
/// True if the slot may be reused.
fn acknowledge(slot: &mut Slot) -> bool {
    match &mut slot.state {
        State::TimedOut(data) | State::Gone(data) | State::Refused(_, data) => {
            slot.ex = None;
            data.take().is_some()
        }
        _ => false,
    }
}

/// Moves a pending request on, handing back its sender. A request that ended without
/// the host's answer (timeout, gone) keeps its data if the host has seen the handle: the
/// host's next answer attempt releases it. One the host never saw is freed at once.
fn retire(id: u64, to: Retire) -> Result<(Option<To>, Option<Arc<Exchange>>)> {
    let mut live = live_slot(id)?;
    let slot = live.slot();
    let old = std::mem::replace(&mut slot.state, State::Answered);
    let (result, reusable) = match old {
        State::Pending { tx, data, seen } => {
            let data = if seen { data } else { None };
            let ex = slot.ex.clone();
            // Begun here and not armed yet: the answer stays on this thread if its
            // handler is running here, else a channel is made and its receiver parked
            // for `arm`.
            let answering = matches!(to, Retire::Answer | Retire::Stream);
            let tx = match tx {
                Some(tx) => Some(To::Tx(tx)),
                None if !answering => None,
                None if here::running(id) => Some(To::Here),
                None => {
                    let (tx, rx) = oneshot::channel();
                    slot.parked = Some((rx, false));
                    Some(To::Tx(tx))
                }
            };
            let reusable = match to {
                Retire::Answer => {
                    slot.ex = None;
                    match &mut slot.parked {
                        Some((_, free)) => {
                            *free = true;
                            false
                        }
                        None => true,
                    }
                }
                Retire::Stream => {
                    slot.state = State::Streaming { data };
                    false
                }
                Retire::TimedOut | Retire::Gone | Retire::Refused(_) => {
                    let keeps = data.is_some();
                    slot.state = match to {
                        Retire::TimedOut => State::TimedOut(data),
                        Retire::Refused(kind) => State::Refused(kind, data),
                        _ => State::Gone(data),
                    };
                    if !keeps {
                        slot.ex = None;
                    }
                    !keeps
                }
            };
            (Ok((tx, ex)), reusable)
        }
        // The host's answer attempt on a request that ended without it: report why, and
        // release the data it no longer needs.
        other @ (State::TimedOut(_) | State::Gone(_) | State::Refused(..)) if matches!(to, Retire::Answer | Retire::Stream) => {
            let err = not_pending(id, &other);
            slot.state = other;
            let freed = acknowledge(slot);
            (Err(err), freed)
        }
        // An expiry that lost the race changes nothing. It runs after every answered
        // request (the service's guard), so it builds no message nobody reads.
        other => {
            let err = if matches!(to, Retire::TimedOut | Retire::Gone) {
                Error { kind: ErrorKind::AlreadyAnswered, message: String::new() }
            } else {
                not_pending(id, &other)
            };
            slot.state = other;
            (Err(err), false)
        }
    };
    if reusable {
        live.free();
    }
    result
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Retire {
    Answer,
    Stream,
    TimedOut,
    Gone,
    Refused(ErrorKind),
}

/// Releases what the host never answered once its server has stopped.
pub(crate) fn purge_server(server: u64) {
    for shard in &TABLE.shards {
        let mut shard = shard.lock();
        let mut freed = Vec::new();
        for (index, slot) in shard.slots.iter_mut().enumerate() {
            if slot.server != server {
                continue;
            }
            if let State::Streaming { data } = &mut slot.state {
                slot.state = State::Gone(data.take());
            }
            if acknowledge(slot) {
                freed.push(index as u32);
            }
        }
        shard.free.extend(freed);
    }
}

/// Takes the right to answer: after this, every other answer is refused.
pub(crate) fn claim(id: u64) -> Result<Claim> {
    let (tx, ex) = retire(id, Retire::Answer)?;
    Ok(Claim { id, tx: tx.ok_or_else(|| invalid(id))?, ex })
}

/// Takes the right to answer with a stream: the request stays open for writes.
pub(crate) fn claim_stream(id: u64) -> Result<(Claim, Arc<Exchange>)> {
    // Make the exchange first (it needs the slot's server); then move to streaming.
    let ex = exchange(id)?;
    let (tx, _) = retire(id, Retire::Stream)?;
    Ok((Claim { id, tx: tx.ok_or_else(|| invalid(id))?, ex: Some(ex.clone()) }, ex))
}

/// The exchange of a request that is streaming its answer, for a write or its end.
pub(crate) fn streaming(id: u64) -> Result<Arc<Exchange>> {
    let mut live = live_slot(id)?;
    let slot = live.slot();
    match (&slot.state, &slot.ex) {
        (State::Streaming { .. }, Some(ex)) => Ok(ex.clone()),
        (State::Pending { .. }, _) => {
            Err(Error::new(ErrorKind::State, format!("request {id:#x} has not begun a streamed answer (ember_response_begin)")))
        }
        (state, _) => {
            let err = not_pending(id, state);
            if acknowledge(slot) {
                live.free();
            }
            Err(err)
        }
    }
}

/// The host ended its streamed answer: its views are released.
pub(crate) fn end_stream(id: u64) -> Result<Arc<Exchange>> {
    let mut live = live_slot(id)?;
    let slot = live.slot();
    match (&slot.state, slot.ex.take()) {
        (State::Streaming { .. }, Some(ex)) => {
            slot.state = State::Answered;
            live.free();
            Ok(ex)
        }
        (state, ex) => {
            let err = match state {
                State::Pending { .. } => Error::new(ErrorKind::State, format!("request {id:#x} has not begun a streamed answer")),
                _ => not_pending(id, state),
            };
            slot.ex = ex;
            if !matches!(slot.state, State::Pending { .. }) && acknowledge(slot) {
                live.free();
            }
            Err(err)
        }
    }
}

/// A streamed answer ended without the host's end (client gone, server stopped).
pub(crate) fn stream_aborted(id: u64) {
    with_slot(id, |slot| {
        if let State::Streaming { data } = &mut slot.state {
            slot.state = State::Gone(data.take());
        }
        Ok(())
    })
    .ok();
}

/// The one answer a request may still receive.
pub(crate) struct Claim {
    id: u64,
    tx: To,
    ex: Option<Arc<Exchange>>,
}

/// Where a claimed answer goes.
enum To {
    Tx(oneshot::Sender<Answer>),
    /// The thread-local slot: its handler is running on this thread.
    Here,
}

impl Claim {
    pub fn send(self, mut answer: Answer) -> Result<()> {
        let id = self.id;
        answer.ex = self.ex;
        match self.tx {
            To::Tx(tx) => tx.send(answer).map_err(|_| not_pending(id, &State::Gone(None))),
            To::Here => {
                here::put(id, answer);
                Ok(())
            }
        }
    }
}

/// Delivers the host's answer. Exactly one answer per request gets through.
pub(crate) fn answer(id: u64, answer: Answer) -> Result<()> {
    claim(id)?.send(answer)
}

/// The engine answers a request for the host (its streamed body is over the limit or too
/// slow). As after an expiry, the request's data stays until the host's next call on the
/// handle, which reports `kind`.
pub(crate) fn refuse(id: u64, kind: ErrorKind, answer: Answer) -> Result<()> {
    let (tx, _) = retire(id, Retire::Refused(kind))?;
    match tx {
        Some(To::Tx(tx)) => tx.send(answer).map_err(|_| not_pending(id, &State::Gone(None))),
        _ => Err(invalid(id)),
    }
}

/// Ends a request the host did not answer: `timed_out` or the client went away. The
/// host hears `Aborted`. Returns false if the host's answer won the race.
pub(crate) fn expire(id: u64, timed_out: bool) -> bool {
    match retire(id, if timed_out { Retire::TimedOut } else { Retire::Gone }) {
        Ok((_, ex)) => {
            if let Some(ex) = ex {
                ex.abort();
            }
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests;
