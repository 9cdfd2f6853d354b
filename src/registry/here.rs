//! The answer of an inline handler that answers during its call, handed back through a
//! thread-local slot: the usual inline request needs no channel (an allocation and its
//! atomics per request). A channel is made only when the answer comes later or from
//! another thread (`super::arm`, or the claim itself).

use crate::request::Answer;
use std::cell::{Cell, RefCell};

/// One thread-local for all of it: a shared library reaches each thread-local through a
/// call (`__tls_get_addr`), so the call's end reads and restores in one reach.
struct Slot {
    /// The request whose handler runs on this thread now, 0 for none.
    running: Cell<u64>,
    /// Whose answer `answer` is. Kept beside it rather than in a tuple with it: building
    /// the tuple was one more copy of the answer per request.
    owner: Cell<u64>,
    answer: RefCell<Option<Answer>>,
}

thread_local! {
    static HERE: Slot = const { Slot { running: Cell::new(0), owner: Cell::new(0), answer: RefCell::new(None) } };
}

/// The handler of request `id` runs on this thread while this lives.
pub(crate) struct Here {
    id: u64,
    outer: u64,
}

impl Here {
    pub fn enter(id: u64) -> Here {
        Here { id, outer: HERE.with(|h| h.running.replace(id)) }
    }

    /// The call is over: its answer, if the handler gave it during the call.
    pub fn leave(self) -> Option<Answer> {
        let (id, outer) = (self.id, self.outer);
        std::mem::forget(self);
        HERE.with(|h| {
            h.running.set(outer);
            if h.owner.get() != id {
                return None;
            }
            h.owner.set(0);
            h.answer.borrow_mut().take()
        })
    }
}

impl Drop for Here {
    fn drop(&mut self) {
        HERE.with(|h| h.running.set(self.outer));
    }
}

/// Whether `id`'s handler is running on this thread (so its answer can stay here).
pub(super) fn running(id: u64) -> bool {
    HERE.with(|h| h.running.get() == id)
}

pub(super) fn put(id: u64, answer: Answer) {
    HERE.with(|h| {
        *h.answer.borrow_mut() = Some(answer);
        h.owner.set(id);
    });
}
