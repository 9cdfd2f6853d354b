//! State the host callbacks share with the interpreter, the callbacks themselves, and
//! the checks results go through.

use crate::ops::*;
use ember::ffi::constants::*;
use ember::ffi::errors::*;
use ember::ffi::request::*;
use ember::ffi::server::*;
use ember::ffi::types::*;
use ember::request::{RequestInfo, StrView};
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One server of this input, as the callbacks see it.
pub struct Slot {
    pub ptr: *mut ember_server,
    /// Set once `ember_server_free` has returned: no callback may touch it after.
    pub freed: AtomicBool,
}
unsafe impl Send for Slot {}
unsafe impl Sync for Slot {}

/// One route registration.
pub struct RouteRec {
    pub server: Arc<Slot>,
    pub kind: Kind,
    pub released: AtomicU32,
    /// The registration succeeded (so its release must run exactly once).
    pub taken: AtomicBool,
}

/// One `respond_nocopy` call's lent body.
pub struct Lent {
    pub body: Box<[u8]>,
    pub released: AtomicU32,
}

#[derive(Default)]
pub struct Shared {
    /// Every request handle a handler saw in this input.
    pub handles: Vec<u64>,
    /// Handles that were accepted for an answer.
    pub answered: Vec<u64>,
    /// Which server each seen handle belongs to.
    pub owners: Vec<(u64, Arc<Slot>)>,
}

pub static SHARED: Mutex<Shared> = Mutex::new(Shared { handles: Vec::new(), answered: Vec::new(), owners: Vec::new() });
pub static OLD: Mutex<Vec<u64>> = Mutex::new(Vec::new());
pub static HANDLER_CALLS: AtomicU64 = AtomicU64::new(0);

/// A result this library has a name for (codes are appended as the ABI grows).
pub fn known(rc: ember_result) -> bool {
    rc <= EMBER_OK && unsafe { CStr::from_ptr(ember_result_name(rc)) }.to_bytes() != b"EMBER_ERR_UNKNOWN"
}

/// A body to lend (`*_nocopy`), kept by the interpreter until every server is freed.
pub fn lend(body: &Option<Buf>) -> Arc<Lent> {
    Arc::new(Lent { body: body.as_ref().map_or(Box::default(), |b| b.bytes.clone().into_boxed_slice()), released: AtomicU32::new(0) })
}

/// After a `*_nocopy` call: a failed one must already have released the body.
pub fn settle_lent(lent: &Lent, null_release: bool, rc: ember_result, what: &str) {
    if null_release {
        lent.released.store(1, SeqCst);
    } else if rc != EMBER_OK {
        assert_eq!(lent.released.load(SeqCst), 1, "a failed {what} must have released the body ({rc})");
    }
}

pub fn trace() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("ABI_FUZZ_TRACE").is_some())
}

pub fn check(rc: ember_result, what: &str) -> ember_result {
    if trace() {
        eprintln!("  {what} -> {rc} {}", if rc != 0 { last_error() } else { String::new() });
    }
    assert!(known(rc), "{what}: unknown result {rc}");
    assert_ne!(rc, EMBER_ERR_PANIC, "{what}: a panic was caught at the boundary: {}", last_error());
    if rc != EMBER_OK {
        // Every failure leaves a message.
        assert!(!last_error().is_empty(), "{what}: failed with {rc} and no message");
    }
    rc
}

pub fn last_error() -> String {
    let p = ember_last_error();
    assert!(!p.is_null());
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

pub fn view(v: StrView) -> &'static [u8] {
    if v.len == 0 {
        return &[];
    }
    assert!(!v.ptr.is_null(), "a view of {} bytes with a NULL pointer", v.len);
    unsafe { std::slice::from_raw_parts(v.ptr.cast(), v.len) }
}

/// Reads every byte of the info struct's views (ASan checks they are live).
pub fn touch_info(info: &RequestInfo) {
    let mut sum = 0u64;
    for v in [info.method, info.path, info.query, info.body, info.remote_addr, info.route] {
        sum += view(v).iter().map(|b| *b as u64).sum::<u64>();
    }
    std::str::from_utf8(view(info.method)).expect("method is UTF-8");
    std::str::from_utf8(view(info.route)).expect("route is UTF-8");
    for (list, n) in [(info.headers, info.header_count), (info.params, info.param_count)] {
        if n == 0 {
            continue;
        }
        assert!(!list.is_null());
        for hv in unsafe { std::slice::from_raw_parts(list, n) } {
            sum += view(hv.name).len() as u64 + view(hv.value).iter().map(|b| *b as u64).sum::<u64>();
        }
    }
    for p in 0..info.param_count {
        let hv = unsafe { &*info.params.add(p) };
        std::str::from_utf8(view(hv.value)).expect("parameter values are UTF-8");
    }
    assert!(matches!(info.http_version, 10 | 11 | 20), "http_version {}", info.http_version);
    std::hint::black_box(sum);
}

pub unsafe extern "C" fn handler(ud: *mut c_void, req: ember_request, info: *const RequestInfo) {
    let rec = &*(ud as *const RouteRec);
    assert!(!rec.server.freed.load(SeqCst), "a handler ran after ember_server_free returned");
    assert_eq!(rec.released.load(SeqCst), 0, "a handler ran after its route was released");
    if trace() {
        eprintln!("  handler {req:#x} kind {:?}", rec.kind);
    }
    assert!(!info.is_null());
    let info = &*info;
    assert_eq!(info.id, req);
    touch_info(info);
    {
        let mut shared = SHARED.lock().unwrap();
        shared.handles.push(req);
        shared.owners.push((req, rec.server.clone()));
    }
    match rec.kind {
        Kind::Defer => {}
        Kind::AnswerNow => {
            let rc = check(ember_request_respond(req, 200, c"X-Now: 1".as_ptr(), 8, b"now".as_ptr().cast(), 3), "respond inside");
            if rc == EMBER_OK {
                SHARED.lock().unwrap().answered.push(req);
            }
        }
        Kind::StopInside => {
            let t = Instant::now();
            // A short grace: a later ember_server_free waits for a stop in progress to
            // reach its own timeout (reported to the lead: free does not shorten it).
            assert_eq!(check(ember_server_stop(rec.server.ptr, 50), "stop inside"), EMBER_OK);
            assert!(t.elapsed() < Duration::from_secs(5), "stop from inside a handler blocked");
            assert_eq!(check(ember_server_wait(rec.server.ptr, 0), "wait inside"), EMBER_ERR_STATE);
        }
        Kind::FreeInside => {
            assert_eq!(check(ember_server_free(rec.server.ptr), "free inside"), EMBER_ERR_STATE);
        }
    }
    // Last: the fuzzer's thread goes on once it sees this.
    HANDLER_CALLS.fetch_add(1, SeqCst);
}

pub unsafe extern "C" fn route_release(ud: *mut c_void) {
    let rec = &*(ud as *const RouteRec);
    assert!(!rec.server.freed.load(SeqCst), "a route's release ran after ember_server_free returned");
    assert!(rec.taken.load(SeqCst), "release ran for a registration that failed");
    assert_eq!(rec.released.fetch_add(1, SeqCst), 0, "a route's release ran twice");
    // A release runs on one of the server's own threads or inside its stop: stop only
    // starts the shutdown there, wait and free are refused.
    match rec.kind {
        Kind::StopInside => assert_eq!(check(ember_server_stop(rec.server.ptr, 0), "stop in release"), EMBER_OK),
        Kind::FreeInside => {
            assert_eq!(check(ember_server_free(rec.server.ptr), "free in release"), EMBER_ERR_STATE);
            assert_eq!(check(ember_server_wait(rec.server.ptr, 0), "wait in release"), EMBER_ERR_STATE);
        }
        _ => {}
    }
}

pub unsafe extern "C" fn body_release(ud: *mut c_void) {
    let lent = &*(ud as *const Lent);
    assert_eq!(lent.released.fetch_add(1, SeqCst), 0, "a nocopy release ran twice");
}

pub unsafe extern "C" fn log_sink(ud: *mut c_void, level: i32, msg: *const c_char, len: usize) {
    let slot = &*(ud as *const Slot);
    assert!(!slot.freed.load(SeqCst), "the log callback ran after ember_server_free returned");
    assert!((1..=4).contains(&level));
    let m = std::slice::from_raw_parts(msg.cast::<u8>(), len);
    std::str::from_utf8(m).expect("log lines are UTF-8");
    let rc = check(ember_server_wait(slot.ptr, 0), "wait in log");
    // Known gap, reported to the lead: the "server N started" line is logged on the host's
    // thread outside `inside::within`, so wait is not refused there (it times out).
    // tests/abi_callbacks.rs has the ignored regression test.
    let start_line = std::str::from_utf8(m).is_ok_and(|t| t.starts_with("server ") && t.ends_with(" started"));
    if !(start_line && rc == EMBER_ERR_TIMED_OUT) {
        assert_eq!(rc, EMBER_ERR_STATE, "wait from a log callback ({:?})", String::from_utf8_lossy(m));
    }
}

pub unsafe extern "C" fn thread_hook(ud: *mut c_void) {
    let slot = &*(ud as *const Slot);
    assert!(!slot.freed.load(SeqCst), "a thread hook ran after ember_server_free returned");
    assert_eq!(check(ember_server_free(slot.ptr), "free in hook"), EMBER_ERR_STATE, "free from a thread hook");
}

/// Calls `f` with a sized output struct: a buffer twice the struct's size, `size` bytes
/// claimed. On failure nothing may be written; on success nothing past min(size, ours), and
/// the struct's `size` field says ours. Returns the struct when the whole of it was written.
pub fn sized_call<T: Copy>(null: bool, size: Size, f: impl FnOnce(*mut T, usize) -> ember_result) -> (ember_result, Option<T>) {
    const MARK: u8 = 0xA5;
    let full = std::mem::size_of::<T>();
    let claimed = match size {
        Size::Full => full,
        Size::Tiny(n) => n as usize % 8,
        Size::Any(n) => n as usize % (2 * full + 1),
    };
    // u64s keep the buffer aligned for T.
    let mut buf = vec![u64::from_ne_bytes([MARK; 8]); (2 * full).div_ceil(8)];
    let p = if null { std::ptr::null_mut() } else { buf.as_mut_ptr().cast::<T>() };
    let rc = f(p, claimed);
    let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), buf.len() * 8) };
    if rc != EMBER_OK {
        assert!(bytes.iter().all(|b| *b == MARK), "a failed call ({rc}) wrote into its output struct");
        return (rc, None);
    }
    assert!(claimed >= std::mem::size_of::<usize>(), "a size of {claimed} bytes was accepted");
    let filled = claimed.min(full);
    assert!(bytes[filled..].iter().all(|b| *b == MARK), "wrote past the {claimed} bytes the caller has");
    let reported = usize::from_ne_bytes(bytes[..8].try_into().unwrap());
    assert_eq!(reported, full, "the size field must say the library's sizeof");
    (rc, (claimed >= full).then(|| unsafe { std::ptr::read(buf.as_ptr().cast::<T>()) }))
}
