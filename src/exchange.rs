//! What a request has beyond its one-shot answer, made only when needed: the host's event
//! callback (writable, readable, aborted, completed), the queue of a streamed answer, the
//! reader of a streamed body. Events go through the request's mailbox, so they follow the
//! dispatch mode, arrive in order and never run at the same time.

use crate::dispatch::{Dispatcher, Mailbox};
use crate::inbox::Inbox;
use crate::stream::Outbox;
use once_cell::sync::OnceCell;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

/// What the host is told about a request it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Event {
    /// A write refused for a full queue may now go through.
    Writable = 1,
    /// A read that found nothing (`WouldBlock`) may now find data, the end, or an error.
    Readable = 2,
    /// Final: the client left, the handler timeout answered, or the server stopped.
    Aborted = 3,
    /// Final: the whole answer was handed to the connection.
    Completed = 4,
}

impl Event {
    pub fn is_final(self) -> bool {
        matches!(self, Event::Aborted | Event::Completed)
    }
}

pub type EventSink = Arc<dyn Fn(u64, Event) + Send + Sync>;

pub(crate) struct Exchange {
    pub id: u64,
    /// Bytes a streamed answer may queue (the server's limit).
    pub queue_limit: usize,
    mailbox: Arc<Mailbox>,
    sink: Mutex<Option<EventSink>>,
    /// The final event was fired (or the exchange ended before anyone listened).
    ended: AtomicBool,
    /// Set when the answer starts streaming.
    pub outbox: OnceCell<Arc<Outbox>>,
    /// Set at the start for routes that stream their request body.
    pub inbox: OnceCell<Arc<Inbox>>,
}

impl Exchange {
    pub fn new(id: u64, dispatcher: &Arc<Dispatcher>) -> Arc<Exchange> {
        Arc::new(Exchange {
            id,
            queue_limit: dispatcher.stream_queue,
            mailbox: Mailbox::new(dispatcher),
            sink: Mutex::new(None),
            ended: AtomicBool::new(false),
            outbox: OnceCell::new(),
            inbox: OnceCell::new(),
        })
    }

    /// Sets the host's callback. False when the exchange already ended (the caller
    /// reports why).
    pub fn listen(&self, sink: EventSink) -> bool {
        let mut slot = self.sink.lock();
        if self.ended.load(Ordering::Acquire) {
            return false;
        }
        *slot = Some(sink);
        true
    }

    /// Tells the host, through its mailbox. A final event is fired once; nothing is
    /// fired after it.
    pub fn fire(&self, event: Event) {
        let sink = {
            let mut slot = self.sink.lock();
            if self.ended.load(Ordering::Acquire) {
                return;
            }
            if event.is_final() {
                self.ended.store(true, Ordering::Release);
                slot.take()
            } else {
                slot.clone()
            }
        };
        if let Some(sink) = sink {
            let id = self.id;
            self.mailbox.post(Box::new(move || sink(id, event)));
        }
    }

    /// The answer is out (or gone): a streamed body the host did not finish reading is
    /// let go, so hyper can end the request.
    pub fn answer_done(&self) {
        if let Some(inbox) = self.inbox.get() {
            if !inbox.is_finished() {
                inbox.abandon();
            }
        }
    }

    /// Ends everything in progress: a streamed answer and a streamed body stop, and the
    /// host hears `Aborted` (unless it already heard the end).
    pub fn abort(&self) {
        if let Some(out) = self.outbox.get() {
            out.close();
        }
        if let Some(inbox) = self.inbox.get() {
            inbox.fail(crate::inbox::InError::Gone);
        }
        self.fire(Event::Aborted);
    }
}

/// Each running server's dispatcher by id, for exchanges made on demand by an ABI call
/// that only has a request handle.
static DISPATCHERS: once_cell::sync::Lazy<Mutex<HashMap<u64, Weak<Dispatcher>>>> = once_cell::sync::Lazy::new(Default::default);

pub(crate) fn register_server(dispatcher: &Arc<Dispatcher>) {
    DISPATCHERS.lock().insert(dispatcher.server_id, Arc::downgrade(dispatcher));
}

pub(crate) fn unregister_server(server_id: u64) {
    DISPATCHERS.lock().remove(&server_id);
}

pub(crate) fn dispatcher_of(server_id: u64) -> Option<Arc<Dispatcher>> {
    DISPATCHERS.lock().get(&server_id).and_then(Weak::upgrade)
}
