//! ABI 3: streamed answers, streamed request bodies, per-request events and WebSockets.
//!
//! Invariants on top of the interpreter's: every lent write is released exactly once
//! (before the call returns when it fails); a request gets at most one final event
//! (aborted or completed); no event or WebSocket callback runs after its server's
//! `ember_server_free` returned; a WebSocket endpoint's release runs exactly once; a read
//! never reports more bytes than it was given room for.

use crate::callbacks::*;
use crate::interp::*;
use crate::ops::*;
use ember::ffi::constants::*;
use ember::ffi::request::ember_request_respond;
use ember::ffi::server::*;
use ember::ffi::stream::*;
use ember::ffi::types::*;
use ember::ffi::ws::*;
use ember::request::RequestInfo;
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

/// One WebSocket endpoint registration.
pub struct WsRec {
    pub server: Arc<Slot>,
    pub released: AtomicU32,
    pub taken: AtomicBool,
}

/// WebSocket handles the open callbacks of this input saw.
pub static WS_SEEN: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// Final events (aborted, completed) per request handle.
static FINAL: Mutex<Option<HashMap<u64, u32>>> = Mutex::new(None);
/// For events on a handle whose server the interpreter does not know.
static NOBODY: Slot = Slot { ptr: std::ptr::null_mut(), freed: AtomicBool::new(false) };

pub fn reset() {
    WS_SEEN.lock().unwrap().clear();
    *FINAL.lock().unwrap() = None;
}

unsafe extern "C" fn on_event(ud: *mut c_void, req: ember_request, event: i32) {
    let slot = &*(ud as *const Slot);
    assert!(!slot.freed.load(SeqCst), "an event callback ran after ember_server_free returned");
    assert!((EMBER_EVENT_WRITABLE..=EMBER_EVENT_COMPLETED).contains(&event), "event {event}");
    if event == EMBER_EVENT_ABORTED || event == EMBER_EVENT_COMPLETED {
        let mut map = FINAL.lock().unwrap();
        let n = map.get_or_insert_with(HashMap::new).entry(req).or_insert(0);
        *n += 1;
        assert_eq!(*n, 1, "request {req:#x} got a second final event ({event})");
    }
}

unsafe extern "C" fn ws_open(ud: *mut c_void, ws: ember_ws, info: *const RequestInfo) {
    let rec = &*(ud as *const WsRec);
    assert!(!rec.server.freed.load(SeqCst), "a WebSocket open callback ran after free");
    assert!(!info.is_null());
    touch_info(&*info);
    WS_SEEN.lock().unwrap().push(ws);
    HANDLER_CALLS.fetch_add(1, SeqCst);
}

unsafe extern "C" fn ws_message(ud: *mut c_void, _ws: ember_ws, kind: i32, data: *const u8, len: usize) {
    let rec = &*(ud as *const WsRec);
    assert!(!rec.server.freed.load(SeqCst), "a WebSocket message callback ran after free");
    let bytes = if len == 0 { &[][..] } else { std::slice::from_raw_parts(data, len) };
    if kind == EMBER_WS_TEXT {
        std::str::from_utf8(bytes).expect("text messages are UTF-8");
    }
}

unsafe extern "C" fn ws_close(ud: *mut c_void, _ws: ember_ws, _code: u16, reason: *const c_char, len: usize) {
    let rec = &*(ud as *const WsRec);
    assert!(!rec.server.freed.load(SeqCst), "a WebSocket close callback ran after free");
    if len > 0 {
        std::str::from_utf8(std::slice::from_raw_parts(reason.cast::<u8>(), len)).expect("close reasons are UTF-8");
    }
}

unsafe extern "C" fn ws_writable(ud: *mut c_void, _ws: ember_ws) {
    let rec = &*(ud as *const WsRec);
    assert!(!rec.server.freed.load(SeqCst), "a WebSocket writable callback ran after free");
}

unsafe extern "C" fn ws_release(ud: *mut c_void) {
    let rec = &*(ud as *const WsRec);
    assert!(!rec.server.freed.load(SeqCst), "a WebSocket endpoint's release ran after free");
    assert!(rec.taken.load(SeqCst), "release ran for a WebSocket registration that failed");
    assert_eq!(rec.released.fetch_add(1, SeqCst), 0, "a WebSocket endpoint's release ran twice");
}

fn ws_handle(run: &Run, w: W) -> u64 {
    match w {
        W::Seen(i) => {
            let seen = WS_SEEN.lock().unwrap();
            if seen.is_empty() { 0 } else { seen[i as usize % seen.len()] }
        }
        W::Request(i) => run.handle(H::Seen(i)),
        W::Forged(x) => x,
    }
}

fn c_opt(s: &Option<Str>) -> (Option<std::ffi::CString>, *const c_char) {
    let c = s.as_ref().map(Str::c);
    let p = c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    (c, p)
}

pub fn exec(run: &mut Run, op: &StreamOp) {
    match op {
        StreamOp::Begin { h, status, headers } => {
            let id = run.handle(*h);
            let headers = headers.buf();
            let (hp, hl) = buf(&headers);
            let rc = check(unsafe { ember_response_begin(id, status.code(), hp.cast(), hl) }, "response_begin");
            if rc == EMBER_OK {
                // Begun is answered: no second answer may get in.
                let again = check(unsafe { ember_request_respond(id, 200, std::ptr::null(), 0, std::ptr::null(), 0) }, "respond after begin");
                assert_ne!(again, EMBER_OK, "a request answered by a begun stream accepted a second answer");
            }
        }
        StreamOp::Write { h, body } => {
            let id = run.handle(*h);
            let (bp, bl) = buf(body);
            let rc = check(unsafe { ember_response_write(id, bp.cast(), bl) }, "response_write");
            if bp.is_null() && bl > 0 {
                assert_eq!(rc, EMBER_ERR_NULL);
            }
        }
        StreamOp::WriteNocopy { h, body, null_release } => {
            let id = run.handle(*h);
            let lent = lend(body);
            let (bp, bl) = match body {
                Some(Buf { null: true, bytes }) => (std::ptr::null(), bytes.len()),
                _ => (lent.body.as_ptr(), lent.body.len()),
            };
            let release: ember_release_fn = if *null_release { None } else { Some(body_release) };
            let rc = check(
                unsafe { ember_response_write_nocopy(id, bp.cast(), bl, release, Arc::as_ptr(&lent) as *mut c_void) },
                "response_write_nocopy",
            );
            settle_lent(&lent, *null_release, rc, "response_write_nocopy");
            run.lent.push(lent);
        }
        StreamOp::End(h) => {
            check(unsafe { ember_response_end(run.handle(*h)) }, "response_end");
        }
        StreamOp::WaitWritable(h, ms) => {
            check(unsafe { ember_response_wait_writable(run.handle(*h), (*ms % 20) as u32) }, "response_wait_writable");
        }
        StreamOp::Read { h, cap, ms, null_buf, null_out } => {
            let id = run.handle(*h);
            let cap = (*cap % 4096) as usize;
            let mut b = vec![0u8; cap];
            let mut n = usize::MAX;
            let bp = if *null_buf { std::ptr::null_mut() } else { b.as_mut_ptr().cast() };
            let np = if *null_out { std::ptr::null_mut() } else { &mut n as *mut usize };
            let rc = check(unsafe { ember_request_read(id, bp, cap, (*ms % 20) as u32, np) }, "request_read");
            if *null_out {
                assert_eq!(rc, EMBER_ERR_NULL);
            }
            if rc == EMBER_OK {
                assert!(n <= cap, "read reported {n} bytes into {cap}");
            }
        }
        StreamOp::OnEvent(h, null_fn) => {
            let id = run.handle(*h);
            let owner = run.owner(id);
            let ud = owner.as_ref().map_or(&NOBODY as *const Slot, Arc::as_ptr) as *mut c_void;
            let f: ember_event_fn = if *null_fn { None } else { Some(on_event) };
            let rc = check(unsafe { ember_request_on_event(id, f, ud) }, "request_on_event");
            if *null_fn {
                assert_eq!(rc, EMBER_ERR_NULL);
            }
        }
        StreamOp::WsAccept(w, headers) => {
            let headers = headers.buf();
            let (hp, hl) = buf(&headers);
            check(unsafe { ember_ws_accept(ws_handle(run, *w), hp.cast(), hl) }, "ws_accept");
        }
        StreamOp::WsSend { ws, kind, data } => {
            let (dp, dl) = buf(data);
            let kind = if (0..=3).contains(kind) { *kind } else { kind % 4 };
            check(unsafe { ember_ws_send(ws_handle(run, *ws), kind, dp.cast(), dl) }, "ws_send");
        }
        StreamOp::WsClose { ws, code, reason } => {
            let (rp, rl) = buf(reason);
            check(unsafe { ember_ws_close(ws_handle(run, *ws), *code, rp.cast(), rl) }, "ws_close");
        }
        StreamOp::WsJoin(ws, group) | StreamOp::WsLeave(ws, group) => {
            let (_keep, gp) = c_opt(group);
            let id = ws_handle(run, *ws);
            let rc = if matches!(op, StreamOp::WsJoin(..)) {
                check(unsafe { ember_ws_join(id, gp) }, "ws_join")
            } else {
                check(unsafe { ember_ws_leave(id, gp) }, "ws_leave")
            };
            let _ = rc;
        }
        StreamOp::WsBuffered(ws, null) => {
            let mut n = 0usize;
            let rc = check(unsafe { ember_ws_buffered(ws_handle(run, *ws), out_ptr(&mut n, *null)) }, "ws_buffered");
            if *null {
                assert_eq!(rc, EMBER_ERR_NULL);
            }
        }
        StreamOp::Broadcast { srv, group, kind, data, except, null_out } => {
            let (_keep, gp) = c_opt(group);
            let (dp, dl) = buf(data);
            let mut sent = usize::MAX;
            let kind = if (0..=3).contains(kind) { *kind } else { kind % 4 };
            check(
                unsafe { ember_server_ws_broadcast(run.ptr(*srv), gp, kind, dp.cast(), dl, ws_handle(run, *except), out_ptr(&mut sent, *null_out)) },
                "ws_broadcast",
            );
        }
        StreamOp::WebSocket { srv, pattern, size, null_open, null_message, null_release } => {
            let Some(server) = run.server(*srv) else {
                let rc = check(unsafe { ember_server_websocket(std::ptr::null_mut(), c"/ws".as_ptr(), std::ptr::null(), std::ptr::null_mut(), None) }, "websocket");
                assert_eq!(rc, EMBER_ERR_NULL);
                return;
            };
            let rec = Arc::new(WsRec { server: server.slot.clone(), released: AtomicU32::new(0), taken: AtomicBool::new(true) });
            let full = std::mem::size_of::<ember_ws_handlers>();
            let claimed = match size {
                Size::Full => full,
                Size::Tiny(n) => *n as usize % 8,
                Size::Any(n) => *n as usize % (2 * full + 1),
            };
            // Room for what the caller claims; the engine must read no more than that.
            let mut room = vec![ember_ws_handlers { size: 0, on_open: None, on_message: None, on_close: None, on_writable: None }; 2];
            room[0] = ember_ws_handlers {
                size: claimed,
                on_open: if *null_open { None } else { Some(ws_open) },
                on_message: if *null_message { None } else { Some(ws_message) },
                on_close: Some(ws_close),
                on_writable: Some(ws_writable),
            };
            let (_keep, pp) = c_opt(pattern);
            let ptr = server.slot.ptr;
            let release: ember_release_fn = if *null_release { None } else { Some(ws_release) };
            let rc = check(unsafe { ember_server_websocket(ptr, pp, room.as_ptr(), Arc::as_ptr(&rec) as *mut c_void, release) }, "websocket");
            if rc == EMBER_OK {
                if *null_release {
                    rec.released.store(1, SeqCst);
                }
                let text = pattern.as_ref().map(Str::c).unwrap().into_string().unwrap();
                run.servers.iter_mut().find(|s| s.slot.ptr == ptr).unwrap().patterns.push(text);
            } else {
                assert_eq!(rec.released.load(SeqCst), 0, "a failed WebSocket registration called release");
                rec.taken.store(false, SeqCst);
                rec.released.store(1, SeqCst);
            }
            run.ws.push(rec);
        }
        StreamOp::RouteFlags { srv, pattern, flags } => {
            let Some(server) = run.server(*srv) else { return };
            let p = PATTERNS[*pattern as usize % PATTERNS.len()];
            let rec = Arc::new(RouteRec { server: server.slot.clone(), kind: Kind::Defer, released: AtomicU32::new(0), taken: AtomicBool::new(true) });
            let cp = std::ffi::CString::new(format!("{p}/s")).unwrap();
            let ptr = server.slot.ptr;
            let rc = check(
                unsafe { ember_server_route_flags(ptr, c"POST".as_ptr(), cp.as_ptr(), *flags, Some(handler), Arc::as_ptr(&rec) as *mut c_void, Some(route_release)) },
                "route_flags",
            );
            if *flags & !EMBER_ROUTE_STREAM_BODY != 0 {
                assert_ne!(rc, EMBER_OK, "unknown route flags {flags:#x} were accepted");
            }
            if rc == EMBER_OK {
                run.servers.iter_mut().find(|s| s.slot.ptr == ptr).unwrap().patterns.push(cp.into_string().unwrap());
            } else {
                rec.taken.store(false, SeqCst);
                rec.released.store(1, SeqCst);
            }
            run.routes.push(rec);
        }
    }
}
