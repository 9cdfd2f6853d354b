//! What a call on a handle is told when the request is not (or no longer) waiting for
//! the host: each ended state names its reason.

use super::State;
use crate::error::{Error, ErrorKind};

#[cold]
pub(super) fn invalid(id: u64) -> Error {
    Error::new(ErrorKind::InvalidHandle, format!("request handle {id:#x} is not one this library issued or is too old"))
}

#[cold]
pub(super) fn not_pending(id: u64, state: &State) -> Error {
    match state {
        State::Answered => Error::new(ErrorKind::AlreadyAnswered, format!("request {id:#x} was already answered")),
        State::Streaming { .. } => Error::new(ErrorKind::AlreadyAnswered, format!("request {id:#x} is already answering with a stream")),
        State::TimedOut(_) => Error::new(ErrorKind::TimedOut, format!("request {id:#x} was already answered by the handler timeout")),
        State::Refused(ErrorKind::TooLarge, _) => {
            Error::new(ErrorKind::TooLarge, format!("request {id:#x}: the body passed the limit; the engine answered 413"))
        }
        State::Refused(ErrorKind::ClientGone, _) => {
            Error::new(ErrorKind::ClientGone, format!("request {id:#x}: the body broke off (bad framing or a reset); the engine answered 400"))
        }
        State::Refused(kind, _) => Error::new(*kind, format!("request {id:#x}: the body arrived too slowly; the engine answered 408")),
        _ => Error::new(ErrorKind::ClientGone, format!("request {id:#x}: the client disconnected or the server stopped")),
    }
}
