//! The panic boundary every exported function runs inside.

use super::errors::{code, set_last_error};
use super::types::ember_result;
use crate::error::{Error, ErrorKind, Result};

/// Runs `f`; an error or a panic becomes a result code with its message stored for
/// `ember_last_error`. Nothing unwinds into the host.
pub(crate) fn guard(f: impl FnOnce() -> Result<()>) -> ember_result {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => fail(e),
        Err(panic) => {
            let what = crate::error::panic_message(&*panic);
            fail(Error::new(ErrorKind::Panic, format!("internal error (panic caught at the C boundary): {what}")))
        }
    }
}

/// For functions that return a value instead of a result: the fallback on panic.
pub(crate) fn guard_value<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(fallback)
}

fn fail(e: Error) -> ember_result {
    let rc = code(e.kind);
    set_last_error(e.message);
    rc
}
