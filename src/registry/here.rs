//! The answer of an inline handler that answers during its call, handed back through a
//! thread-local slot: the usual inline request needs no channel (an allocation and its
//! atomics per request). A channel is made only when the answer comes later or from
//! another thread (`super::arm`, or the claim itself).

use crate::request::Answer;
use std::cell::{Cell, RefCell};

thread_local! {
    /// The request whose handler runs on this thread now, 0 for none.
    static RUNNING: Cell<u64> = const { Cell::new(0) };
    static ANSWER: RefCell<Option<(u64, Answer)>> = const { RefCell::new(None) };
}

/// The handler of request `id` runs on this thread while this lives.
pub(crate) struct Here {
    id: u64,
    outer: u64,
}

impl Here {
    pub fn enter(id: u64) -> Here {
        Here { id, outer: RUNNING.with(|r| r.replace(id)) }
    }

    /// The call is over: its answer, if the handler gave it during the call.
    pub fn leave(self) -> Option<Answer> {
        let id = self.id;
        drop(self);
        ANSWER.with(|a| {
            let mut a = a.borrow_mut();
            match a.take() {
                Some((owner, answer)) if owner == id => Some(answer),
                other => {
                    *a = other;
                    None
                }
            }
        })
    }
}

impl Drop for Here {
    fn drop(&mut self) {
        RUNNING.with(|r| r.set(self.outer));
    }
}

/// Whether `id`'s handler is running on this thread (so its answer can stay here).
pub(super) fn running(id: u64) -> bool {
    RUNNING.with(|r| r.get() == id)
}

pub(super) fn put(id: u64, answer: Answer) {
    ANSWER.with(|a| *a.borrow_mut() = Some((id, answer)));
}
