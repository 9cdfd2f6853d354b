//! Types that exist only at the C boundary.

use crate::request::RequestInfo;
use std::os::raw::{c_char, c_void};

/// Every fallible function returns one: 0 (`EMBER_OK`) or a negative `EMBER_ERR_*` code.
/// The message of the last error on this thread: `ember_last_error()`.
pub type ember_result = i32;

/// A request handle: a generation-checked token (never 0), not a pointer. Using a handle
/// that was answered, timed out, or is simply wrong returns an error; it never crashes.
pub type ember_request = u64;

/// A route handler. Called once per matching request with the request's handle and its
/// fields (`info`: its views stay valid until your first answer call on `req`, whatever
/// it returns, or until the server stops). Answer with `ember_request_respond` inside the call, or return and answer
/// later from any thread (deferred). Runs on a pool thread (`EMBER_DISPATCH_POOL`), on an
/// I/O thread (`EMBER_DISPATCH_INLINE`, must not block), or under `EMBER_DISPATCH_AUTO` (the
/// default) on the I/O thread while a spare one stays free, else on the pool (blocking is
/// safe; blocking waits on its own request return `EMBER_ERR_STATE` inline). Must not
/// unwind (no C++ throw).
pub type ember_handler_fn = Option<unsafe extern "C" fn(user_data: *mut c_void, req: ember_request, info: *const RequestInfo)>;

/// Called exactly once, from any thread, when the engine no longer needs `user_data`.
pub type ember_release_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// A log line (`msg` is not NUL-terminated). May be called from any thread, concurrently.
pub type ember_log_fn = Option<unsafe extern "C" fn(user_data: *mut c_void, level: i32, msg: *const c_char, len: usize)>;

/// Called on each engine thread that may run host callbacks, when it starts or ends.
pub type ember_thread_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// A host pointer handed back to the host; the engine never dereferences it.
#[derive(Clone, Copy)]
pub(crate) struct UserData(pub *mut c_void);

// SAFETY: the host declares its user_data usable from any thread by registering it.
unsafe impl Send for UserData {}
unsafe impl Sync for UserData {}

/// Calls the host's release callback once, when dropped, unless disarmed (a failed call
/// takes nothing).
pub(crate) struct Release {
    release: ember_release_fn,
    pub user_data: UserData,
    armed: std::sync::atomic::AtomicBool,
}

impl Release {
    pub fn new(release: ember_release_fn, user_data: UserData) -> Release {
        Release { release, user_data, armed: std::sync::atomic::AtomicBool::new(true) }
    }

    pub fn disarm(&self) {
        self.armed.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if !self.armed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if let Some(f) = self.release {
            let ud = self.user_data;
            // SAFETY: the host's own callback with the host's own pointer.
            drop(std::panic::catch_unwind(move || unsafe { f(ud.0) }));
        }
    }
}

/// The host's body buffer, handed back through its release callback when hyper is done.
pub(crate) struct ForeignBody {
    ptr: *const u8,
    len: usize,
    _release: Release,
}

// SAFETY: the host hands the buffer over for the engine's use from any thread.
unsafe impl Send for ForeignBody {}
unsafe impl Sync for ForeignBody {}

impl AsRef<[u8]> for ForeignBody {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: checked non-NULL at construction; valid until release runs.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl ForeignBody {
    /// Takes a lent buffer; on a bad pointer/length the release still runs (on drop).
    pub(crate) fn lend(ptr: *const u8, len: usize, release: Release) -> crate::error::Result<ForeignBody> {
        let checked = super::args::bytes(ptr, len, "body").map(|_| ());
        let foreign = ForeignBody { ptr, len: if checked.is_ok() { len } else { 0 }, _release: release };
        checked.map(|_| foreign)
    }
}

