//! The last error message of each thread, and names for result codes.

use super::boundary::guard_value;
use super::constants::*;
use crate::error::ErrorKind;
use super::types::ember_result;
use std::cell::RefCell;
use std::ffi::CString;
use std::os::raw::c_char;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

pub(crate) fn set_last_error(message: String) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// The message of the last error on this thread; never NULL ("" if none yet).
///
/// Ownership: the library owns the string. It stays valid until the next failing
/// `ember_` call on this thread. Do not free it.
#[no_mangle]
pub extern "C" fn ember_last_error() -> *const c_char {
    static EMPTY: &[u8] = b"\0";
    guard_value(EMPTY.as_ptr().cast(), || LAST_ERROR.with(|e| e.borrow().as_ptr()))
}

/// Copies the last error message into `buf` (NUL-terminated, cut to `cap` - 1 bytes).
///
/// `*out_len` (NULL is fine) receives the message's full length without the NUL.
/// Returns `EMBER_ERR_BUFFER_TOO_SMALL` when the message was cut. `buf` may be NULL only
/// when `cap` is 0 (to ask for the length).
///
/// Unlike every other function, this one never changes the last error itself, so asking
/// for the length first and copying second returns the original message.
#[no_mangle]
pub unsafe extern "C" fn ember_last_error_copy(buf: *mut c_char, cap: usize, out_len: *mut usize) -> ember_result {
    guard_value(EMBER_ERR_PANIC, || {
        let message = LAST_ERROR.with(|e| e.borrow().as_bytes().to_vec());
        if !out_len.is_null() {
            // SAFETY: a non-NULL output pointer is the host's promise of writable memory.
            unsafe { out_len.write(message.len()) };
        }
        if cap == 0 {
            return if message.is_empty() { EMBER_OK } else { EMBER_ERR_BUFFER_TOO_SMALL };
        }
        if buf.is_null() {
            return EMBER_ERR_NULL;
        }
        let n = message.len().min(cap - 1);
        // SAFETY: the host promises `cap` writable bytes at `buf`.
        unsafe {
            std::ptr::copy_nonoverlapping(message.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
        if n < message.len() { EMBER_ERR_BUFFER_TOO_SMALL } else { EMBER_OK }
    })
}

/// Lists every result code once: the number comes from `constants.rs` (the only place
/// numbers are written), the name from the constant's own identifier.
macro_rules! result_codes {
    ($($kind:ident => $code:ident),* $(,)?) => {
        /// The result code of an engine error kind.
        pub(crate) fn code(kind: ErrorKind) -> ember_result {
            match kind { $(ErrorKind::$kind => $code,)* }
        }

        fn name_of(code: ember_result) -> &'static [u8] {
            match code {
                EMBER_OK => b"EMBER_OK\0",
                $($code => concat!(stringify!($code), "\0").as_bytes(),)*
                _ => b"EMBER_ERR_UNKNOWN\0",
            }
        }
    };
}

result_codes! {
    Null => EMBER_ERR_NULL,
    InvalidArg => EMBER_ERR_INVALID_ARG,
    State => EMBER_ERR_STATE,
    Bind => EMBER_ERR_BIND,
    Route => EMBER_ERR_ROUTE,
    AlreadyAnswered => EMBER_ERR_ALREADY_ANSWERED,
    TimedOut => EMBER_ERR_TIMED_OUT,
    ClientGone => EMBER_ERR_CLIENT_GONE,
    InvalidHandle => EMBER_ERR_INVALID_HANDLE,
    NotFound => EMBER_ERR_NOT_FOUND,
    BufferTooSmall => EMBER_ERR_BUFFER_TOO_SMALL,
    Panic => EMBER_ERR_PANIC,
    Runtime => EMBER_ERR_RUNTIME,
    WouldBlock => EMBER_ERR_WOULD_BLOCK,
    TooLarge => EMBER_ERR_TOO_LARGE,
    Unsupported => EMBER_ERR_UNSUPPORTED,
}

/// A stable name for a result code ("EMBER_OK", "EMBER_ERR_NULL", ...;
/// "EMBER_ERR_UNKNOWN" for numbers this version does not know). Static; do not free.
#[no_mangle]
pub extern "C" fn ember_result_name(code: ember_result) -> *const c_char {
    name_of(code).as_ptr().cast()
}

/// The library version, e.g. "0.1.0". Static; do not free.
#[no_mangle]
pub extern "C" fn ember_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// `EMBER_ABI_VERSION` of the loaded library: compare with the header's to detect a mismatch.
#[no_mangle]
pub extern "C" fn ember_abi_version() -> u32 {
    super::constants::EMBER_ABI_VERSION
}
