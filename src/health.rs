//! Living behind a load balancer: an optional health path answered by the engine, and a
//! drain mode. Draining, the health path answers 503 so health checks take the process out
//! of rotation, and every HTTP/1 answer closes its connection so keep-alive clients (a
//! proxy's upstream pool) reconnect elsewhere; new connections are still accepted and
//! served until the host stops the server, or stops accepting: then the listeners close,
//! so a balancer without active health checks (nginx open source) is refused at connect
//! and sends the request elsewhere, before anything of it was sent here.

use crate::request::Answer;
use bytes::Bytes;
use http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

pub(crate) struct Health {
    pub path: Option<String>,
    draining: AtomicBool,
    /// True once the listeners are to close (the accept loops watch it).
    refuse: watch::Sender<bool>,
    /// Listeners whose accept loop has not closed them yet: `stop_accepting` waits for
    /// none, so that a connection tried after it returns is refused.
    open_listeners: parking_lot::Mutex<usize>,
    closed: parking_lot::Condvar,
}

impl Health {
    pub fn new(path: Option<String>) -> Health {
        Health {
            path,
            draining: AtomicBool::new(false),
            refuse: watch::channel(false).0,
            open_listeners: parking_lot::Mutex::new(0),
            closed: parking_lot::Condvar::new(),
        }
    }

    /// An accept loop is about to run; `listener_closed` when its listener is gone.
    pub fn listener_opened(&self) {
        *self.open_listeners.lock() += 1;
    }

    pub fn listener_closed(&self) {
        let mut n = self.open_listeners.lock();
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.closed.notify_all();
        }
    }

    /// Waits (at most `limit`) until every listener is closed; false if some are still open.
    pub fn wait_listeners_closed(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        let mut n = self.open_listeners.lock();
        while *n > 0 {
            if self.closed.wait_until(&mut n, until).timed_out() {
                return *n == 0;
            }
        }
        true
    }

    /// Drains, and closes the listeners (after taking what the kernel already queued).
    pub fn stop_accepting(&self) {
        self.drain();
        self.refuse.send_replace(true);
    }

    pub fn refusing(&self) -> watch::Receiver<bool> {
        self.refuse.subscribe()
    }

    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// The engine's answer when `path` is the health path.
    pub fn answer(&self, method: &http::Method, path: &str) -> Option<Answer> {
        let health = self.path.as_deref()?;
        if path != health || !(method == http::Method::GET || method == http::Method::HEAD) {
            return None;
        }
        let (status, body) = if self.is_draining() { (503, "{\"status\": \"draining\"}") } else { (200, "{\"status\": \"ok\"}") };
        let mut a = Answer::new(status, http::HeaderMap::new(), Bytes::from_static(body.as_bytes()));
        a.headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        a.headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        Some(a)
    }
}
