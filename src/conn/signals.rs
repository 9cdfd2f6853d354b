//! A connection polled beside the two signals that ask it to finish (the server stops,
//! the watchdog finds it idle), without polling those on every wake-up of the connection.
//! `tokio::select!` polls every branch each time the task wakes, which is once or more per
//! request: the two signal futures cost more instructions per request than the engine's
//! routing (bench/hotpath.sh). Here they are polled only when their own waker fired.
//! `WhenWoken` does the same for the watchdog's timer beside the connection.

use futures_util::task::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// The signals' waker: notes that a signal may be ready and wakes the connection's task.
struct Side {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Side {
    /// Whether the signals must be polled now (their waker fired). The task's waker is
    /// registered again only when a wake may have taken it (`woken` set: a signal stores
    /// the flag before it takes the waker) or the task's waker changed: registering it on
    /// every wake-up of the connection, once or more per request, cost an atomic swap and
    /// a waker comparison each time. With the flag clear the registered waker is still
    /// there, and a signal that fires later sets the flag and wakes the task.
    fn take_wake(&self, known: &mut Option<Waker>, cx: &Context<'_>) -> bool {
        let same = known.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
        if same && !self.woken.load(Ordering::Acquire) {
            return false;
        }
        // Registered before the flag is read: a signal that fires in between is seen now
        // or wakes the task again.
        self.task.register(cx.waker());
        if !same {
            *known = Some(cx.waker().clone());
        }
        self.woken.swap(false, Ordering::AcqRel)
    }
}

impl Wake for Side {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// Ready(true) when a signal fired first, Ready(false) when the connection ended.
pub(crate) struct ConnOrSignal<'a, C, A, B> {
    conn: Pin<&'a mut C>,
    a: Pin<&'a mut A>,
    b: Pin<&'a mut B>,
    side: Arc<Side>,
    waker: Waker,
    /// The task's waker as last registered with `side`.
    known: Option<Waker>,
}

impl<'a, C: Future, A: Future, B: Future> ConnOrSignal<'a, C, A, B> {
    pub fn new(conn: Pin<&'a mut C>, a: Pin<&'a mut A>, b: Pin<&'a mut B>) -> Self {
        // Woken to begin with: the signals are polled once, which registers their waker.
        let side = Arc::new(Side { woken: AtomicBool::new(true), task: AtomicWaker::new() });
        let waker = Waker::from(side.clone());
        ConnOrSignal { conn, a, b, side, waker, known: None }
    }
}

impl<C: Future, A: Future, B: Future> Future for ConnOrSignal<'_, C, A, B> {
    type Output = bool;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let this = self.get_mut();
        if this.conn.as_mut().poll(cx).is_ready() {
            return Poll::Ready(false);
        }
        if this.side.take_wake(&mut this.known, cx) {
            let mut side_cx = Context::from_waker(&this.waker);
            if this.a.as_mut().poll(&mut side_cx).is_ready() || this.b.as_mut().poll(&mut side_cx).is_ready() {
                return Poll::Ready(true);
            }
        }
        Poll::Pending
    }
}

/// A future polled only when its own waker fired, or once after `rearm`. The watchdog's
/// timer beside the connection: `tokio::select!` polled the `Sleep` (its clock handle, the
/// task budget) on every wake-up of the connection, once or more per request.
pub(crate) struct WhenWoken<F> {
    inner: Pin<Box<F>>,
    side: Arc<Side>,
    waker: Waker,
    known: Option<Waker>,
}

impl<F: Future> WhenWoken<F> {
    pub fn new(inner: F) -> Self {
        // Woken to begin with: the first poll registers the inner future's waker.
        let side = Arc::new(Side { woken: AtomicBool::new(true), task: AtomicWaker::new() });
        let waker = Waker::from(side.clone());
        WhenWoken { inner: Box::pin(inner), side, waker, known: None }
    }

    /// The inner future, changed in a way that needs a poll to take effect (a timer
    /// reset): it is polled on the next poll of this.
    pub fn rearm(&mut self) -> Pin<&mut F> {
        self.side.woken.store(true, Ordering::Release);
        self.inner.as_mut()
    }
}

impl<F: Future> Future for WhenWoken<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        if this.side.take_wake(&mut this.known, cx) {
            return this.inner.as_mut().poll(&mut Context::from_waker(&this.waker));
        }
        Poll::Pending
    }
}
