//! The engine's queues between threads: the callback pool's two (requests, bounded: a full
//! queue is answered 503 by the caller; callbacks of ongoing exchanges, unbounded and taken
//! first: they free resources and keep streams moving), which the pool threads wait on
//! together, and the access log's bounded channel.
//!
//! With the `crossbeam` feature (default) they are crossbeam-channel's, which spins a little
//! before a thread sleeps and keeps pool dispatch at its speed under load; without it (the
//! minimal library) a parking_lot mutex and condition variable, 83 KB smaller (README, Size).
//! Both offer the same API; dropping the `LaneSender` closes the pool's queues, and its
//! threads finish what is queued and stop.

#[cfg(feature = "crossbeam")]
mod channel;
#[cfg(feature = "crossbeam")]
pub(crate) use channel::*;
#[cfg(not(feature = "crossbeam"))]
mod lock;
#[cfg(not(feature = "crossbeam"))]
pub(crate) use lock::*;

pub(crate) enum Work<J, C> {
    Request(J),
    Callback(C),
}
