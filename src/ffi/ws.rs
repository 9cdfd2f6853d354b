//! `ember_ws_*` and the WebSocket parts of `ember_server_*`.
//!
//! Lifecycle of a connection: 1. a GET upgrade on a path registered with
//! `ember_server_websocket` reaches `on_open` with a fresh `ember_ws` handle and the
//! request's info 2. the host accepts (`ember_ws_accept`) or refuses by answering the
//! request (`ember_request_respond(info->id, 403, ...)`), now or later from any thread
//! 3. `on_message` per whole message; `ember_ws_send` / `ember_ws_close` / groups from any
//! thread 4. `on_close` exactly once per accepted connection; the handle is dead after it.

use super::args::{self, c_str, non_null};
use super::boundary::guard;
use super::constants::*;
use super::server::{ember_server, get};
use super::types::*;
use crate::error::{Error, ErrorKind, Result};
use crate::handler::Request;
use crate::request::RequestInfo;
use crate::ws::{self, Kind, WsRoute};
use std::os::raw::{c_char, c_void};
use std::sync::Arc;

/// A WebSocket connection handle: a generation-checked token (never 0), not a pointer.
/// A handle whose connection ended returns `EMBER_ERR_CLIENT_GONE` (for a while, then
/// `EMBER_ERR_INVALID_HANDLE`); it never crashes.
pub type ember_ws = u64;

/// The upgrade request reached a WebSocket path. `info` is valid as for a handler
/// (`info->id` is the request: answer it to refuse). Accept with `ember_ws_accept(ws, ...)`.
pub type ember_ws_open_fn = Option<unsafe extern "C" fn(user_data: *mut c_void, ws: ember_ws, info: *const RequestInfo)>;
/// One whole message (fragments reassembled; text is valid UTF-8). `data` is valid during
/// the call only. `kind` is `EMBER_WS_TEXT` or `EMBER_WS_BINARY`.
pub type ember_ws_message_fn = Option<unsafe extern "C" fn(user_data: *mut c_void, ws: ember_ws, kind: i32, data: *const u8, len: usize)>;
/// The connection ended: the close code (1005 when the peer sent none, 1006 when it went
/// without a close frame, 1001 when the server stops) and reason (not NUL-terminated).
pub type ember_ws_close_fn = Option<unsafe extern "C" fn(user_data: *mut c_void, ws: ember_ws, code: u16, reason: *const c_char, len: usize)>;
/// A send refused with `EMBER_ERR_WOULD_BLOCK` may now go through.
pub type ember_ws_writable_fn = Option<unsafe extern "C" fn(user_data: *mut c_void, ws: ember_ws)>;

/// The callbacks of a WebSocket path. Set `size` to `sizeof(ember_ws_handlers)`: fields
/// are only ever appended. `on_open` NULL accepts every upgrade; `on_message` is
/// required; the others may be NULL. Callbacks of one connection run one at a time, in
/// order (open, messages, close), where the server's handlers run.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_ws_handlers {
    pub size: usize,
    pub on_open: ember_ws_open_fn,
    pub on_message: ember_ws_message_fn,
    pub on_close: ember_ws_close_fn,
    pub on_writable: ember_ws_writable_fn,
}

fn kind_of(kind: i32) -> Result<Kind> {
    match kind {
        EMBER_WS_TEXT => Ok(Kind::Text),
        EMBER_WS_BINARY => Ok(Kind::Binary),
        _ => Err(Error::new(ErrorKind::InvalidArg, format!("message kind {kind} is not EMBER_WS_TEXT or EMBER_WS_BINARY"))),
    }
}

/// Reads the host's struct, as much of it as this library and the host both know.
fn handlers_of(p: *const ember_ws_handlers) -> Result<ember_ws_handlers> {
    let given = non_null(p, "handlers")?;
    let needed = std::mem::offset_of!(ember_ws_handlers, on_close) + std::mem::size_of::<ember_ws_close_fn>();
    if given.size < needed {
        return Err(Error::new(ErrorKind::InvalidArg, format!("handlers->size is {}; set it to sizeof(ember_ws_handlers)", given.size)));
    }
    let mut h = ember_ws_handlers { size: 0, on_open: None, on_message: None, on_close: None, on_writable: None };
    let n = given.size.min(std::mem::size_of::<ember_ws_handlers>());
    // SAFETY: the host promises `size` readable bytes; we copy at most our own size.
    unsafe { std::ptr::copy_nonoverlapping(p.cast::<u8>(), (&mut h as *mut ember_ws_handlers).cast::<u8>(), n) };
    Ok(h)
}

fn text_check(kind: Kind, data: &[u8]) -> Result<()> {
    if kind == Kind::Text && std::str::from_utf8(data).is_err() {
        return Err(Error::new(ErrorKind::InvalidArg, "a text message must be UTF-8"));
    }
    Ok(())
}

/// Registers a WebSocket endpoint on `pattern` (route syntax; GET upgrades on HTTP/1.1).
/// A plain GET there gets 426. Its connections join the group named `pattern`. Before
/// start only. `EMBER_ERR_UNSUPPORTED` in a library built without the `ws` feature (the
/// minimal one); every `ember_ws_*` function there fails the same way.
///
/// Ownership: `handlers` is copied. On success the engine holds `user_data` and calls
/// `release` (NULL is fine) exactly once when it no longer needs it (after stop, or at
/// free); on failure nothing is taken.
#[no_mangle]
pub unsafe extern "C" fn ember_server_websocket(
    server: *mut ember_server,
    pattern: *const c_char,
    handlers: *const ember_ws_handlers,
    user_data: *mut c_void,
    release: ember_release_fn,
) -> ember_result {
    guard(|| {
        let s = get(server)?;
        let pattern = c_str(pattern, "pattern")?;
        let h = handlers_of(handlers)?;
        let on_message = h.on_message.ok_or_else(|| args::null("handlers->on_message"))?;
        let owner = Arc::new(Release::new(release, UserData(user_data)));
        let o = owner.clone();
        let open: ws::OnOpen = match h.on_open {
            Some(f) => Arc::new(move |ws: u64, req: &Request| {
                let ud = o.user_data;
                // SAFETY: the host's callback, its pointer, and an info that outlives the call.
                unsafe { f(ud.0, ws, req.data().info()) }
            }),
            None => Arc::new(|ws: u64, _: &Request| {
                let _ = ws::accept(ws, b"");
            }),
        };
        let o = owner.clone();
        let message: ws::OnMessage = Arc::new(move |ws: u64, kind: Kind, data: &[u8]| {
            let ud = o.user_data;
            // SAFETY: as above; `data` lives for the call.
            unsafe { on_message(ud.0, ws, kind as i32, data.as_ptr(), data.len()) }
        });
        let o = owner.clone();
        let on_close = h.on_close;
        let close: ws::OnClose = Arc::new(move |ws: u64, code: u16, reason: &str| {
            if let Some(f) = on_close {
                let ud = o.user_data;
                // SAFETY: as above.
                unsafe { f(ud.0, ws, code, reason.as_ptr().cast(), reason.len()) }
            }
        });
        let writable: Option<ws::OnWritable> = h.on_writable.map(|f| {
            let o = owner.clone();
            Arc::new(move |ws: u64| {
                let ud = o.user_data;
                // SAFETY: as above.
                unsafe { f(ud.0, ws) }
            }) as ws::OnWritable
        });
        let route = Arc::new(WsRoute::new(open, message, close, writable));
        let result = s.websocket(pattern, route);
        if result.is_err() {
            owner.disarm();
        }
        result
    })
}

/// Accepts an upgrade seen by `on_open` (any thread, once): the engine answers 101 with
/// `headers` ("Name: value" lines, e.g. "Sec-WebSocket-Protocol: chat"; NULL/0 for none)
/// on top of its own. Sends made afterwards are written once the upgrade completes.
/// Errors as for answering the request (`EMBER_ERR_TIMED_OUT`, `EMBER_ERR_CLIENT_GONE`,
/// `EMBER_ERR_ALREADY_ANSWERED`).
#[no_mangle]
pub unsafe extern "C" fn ember_ws_accept(ws: ember_ws, headers: *const c_char, headers_len: usize) -> ember_result {
    guard(|| ws::accept(ws, args::bytes(headers.cast(), headers_len, "headers")?))
}

/// Sends one message, copied once into its frame; any thread. `EMBER_ERR_WOULD_BLOCK`: the
/// connection's queue is over `EMBER_LIMIT_WS_QUEUE_BYTES`, nothing was taken (wait for
/// `on_writable`). `EMBER_ERR_CLIENT_GONE`: closed or closing. `EMBER_ERR_STATE`: not
/// accepted yet. Text must be UTF-8 (`EMBER_ERR_INVALID_ARG`).
#[no_mangle]
pub unsafe extern "C" fn ember_ws_send(ws: ember_ws, kind: i32, data: *const c_void, len: usize) -> ember_result {
    guard(|| {
        let kind = kind_of(kind)?;
        let data = args::bytes(data.cast(), len, "data")?;
        text_check(kind, data)?;
        ws::send(ws, kind, data)
    })
}

/// Starts the closing handshake: queued messages go first, then a close frame with
/// `code` (1000-1003, 1007-1014, 3000-4999) and `reason` (UTF-8, at most 123 bytes;
/// NULL/0 for none). `on_close` follows when the peer answers (or after 5 s).
#[no_mangle]
pub unsafe extern "C" fn ember_ws_close(ws: ember_ws, code: u16, reason: *const c_char, reason_len: usize) -> ember_result {
    guard(|| {
        let reason = args::bytes(reason.cast(), reason_len, "reason")?;
        let reason = std::str::from_utf8(reason).map_err(|_| Error::new(ErrorKind::InvalidArg, "the close reason must be UTF-8"))?;
        ws::close(ws, code, reason)
    })
}

/// Adds the connection to the group named `group` (copied); broadcasts to the group reach
/// it. Joining twice is fine. It leaves every group when it closes.
#[no_mangle]
pub unsafe extern "C" fn ember_ws_join(ws: ember_ws, group: *const c_char) -> ember_result {
    guard(|| ws::join(ws, c_str(group, "group")?))
}

/// Removes the connection from `group` (no error if it was not in it).
#[no_mangle]
pub unsafe extern "C" fn ember_ws_leave(ws: ember_ws, group: *const c_char) -> ember_result {
    guard(|| ws::leave(ws, c_str(group, "group")?))
}

/// Bytes queued for the connection and not yet written, into `*out_bytes`.
#[no_mangle]
pub unsafe extern "C" fn ember_ws_buffered(ws: ember_ws, out_bytes: *mut usize) -> ember_result {
    guard(|| {
        if out_bytes.is_null() {
            return Err(args::null("out_bytes"));
        }
        args::write(out_bytes, "out_bytes", ws::buffered(ws)?)
    })
}

/// Sends one message to every connection in `group` (a WebSocket route's pattern, or a
/// name connections joined) except `except` (0 = none). The frame is encoded once and
/// shared. A connection whose queue is full misses it. `*out_sent` (NULL is fine)
/// receives how many connections it was queued to. While running only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_ws_broadcast(
    server: *const ember_server,
    group: *const c_char,
    kind: i32,
    data: *const c_void,
    len: usize,
    except: ember_ws,
    out_sent: *mut usize,
) -> ember_result {
    guard(|| {
        let s = get(server)?;
        let group = c_str(group, "group")?;
        let kind = kind_of(kind)?;
        let data = args::bytes(data.cast(), len, "data")?;
        text_check(kind, data)?;
        let done = s.broadcast(group, kind, data, except)?;
        if !out_sent.is_null() {
            args::write(out_sent, "out_sent", done.sent)?;
        }
        Ok(())
    })
}
