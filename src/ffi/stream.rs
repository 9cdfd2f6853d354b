//! `ember_response_*` (streamed answers), `ember_request_read` (streamed bodies) and
//! `ember_request_on_event`. The request handle stays the handle of its stream.
//!
//! Lifecycle of a streamed answer: 1. `ember_response_begin` (instead of
//! `ember_request_respond`) 2. `ember_response_write` any number of times, from any
//! thread 3. `ember_response_end`. A write into a full queue returns
//! `EMBER_ERR_WOULD_BLOCK` and takes nothing: wait for `EMBER_EVENT_WRITABLE` or block in
//! `ember_response_wait_writable`, then write again.

use super::args::{self, write};
use super::boundary::guard;
use super::constants::EMBER_WAIT_FOREVER;
use super::types::*;
use crate::error::{Error, ErrorKind};
use crate::exchange::{Event, EventSink};
use crate::streaming;
use bytes::Bytes;
use std::os::raw::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

/// An event on a request: `EMBER_EVENT_WRITABLE`, `EMBER_EVENT_READABLE`, or the final
/// `EMBER_EVENT_ABORTED` / `EMBER_EVENT_COMPLETED` (exactly one of them, last). Events of
/// one request run one at a time, in order, where the server's handlers run (pool or
/// I/O thread).
pub type ember_event_fn = Option<unsafe extern "C" fn(user_data: *mut c_void, req: ember_request, event: i32)>;

fn timeout(ms: u32) -> Option<Duration> {
    (ms != EMBER_WAIT_FOREVER).then(|| Duration::from_millis(ms as u64))
}

/// Starts a streamed answer: `status` (200-999) and `headers` ("Name: value" lines) now,
/// the body in `ember_response_write` calls: chunked on HTTP/1.1, DATA frames on HTTP/2.
/// A `Content-Length` among the headers is kept: the body is then sent length-delimited,
/// and one that ends short (or runs over) is cut, so the client can tell.
/// Instead of `ember_request_respond`; same errors. The request's views stay valid until
/// `ember_response_end`. Headers are copied.
#[no_mangle]
pub unsafe extern "C" fn ember_response_begin(req: ember_request, status: u16, headers: *const c_char, headers_len: usize) -> ember_result {
    guard(|| streaming::begin(req, status, args::bytes(headers.cast(), headers_len, "headers")?))
}

/// Queues `len` bytes of a streamed answer (copied). `EMBER_ERR_WOULD_BLOCK`: the queue is
/// over `EMBER_LIMIT_STREAM_QUEUE_BYTES`, nothing was taken. `EMBER_ERR_CLIENT_GONE`: the
/// client left or the server stopped. Any thread.
#[no_mangle]
pub unsafe extern "C" fn ember_response_write(req: ember_request, data: *const c_void, len: usize) -> ember_result {
    guard(|| {
        let data = args::bytes(data.cast(), len, "data")?;
        streaming::write(req, Bytes::copy_from_slice(data))
    })
}

/// Like `ember_response_write`, but lends `data` instead of copying it.
///
/// Ownership: `data` stays lent until `release(release_data)` (NULL is fine) runs, exactly
/// once, from any thread, whatever this returns (before this returns when the chunk was
/// not taken, so the caller may write it again).
#[no_mangle]
pub unsafe extern "C" fn ember_response_write_nocopy(
    req: ember_request,
    data: *const c_void,
    len: usize,
    release: ember_release_fn,
    release_data: *mut c_void,
) -> ember_result {
    let owner = Release::new(release, UserData(release_data));
    guard(move || {
        let foreign = ForeignBody::lend(data.cast(), len, owner)?;
        streaming::write(req, Bytes::from_owner(foreign))
    })
}

/// Ends a streamed answer once what is queued is sent. The request's views are released;
/// the handle answers `EMBER_ERR_ALREADY_ANSWERED` from now on.
#[no_mangle]
pub unsafe extern "C" fn ember_response_end(req: ember_request) -> ember_result {
    guard(|| streaming::end(req))
}

/// Ends a streamed answer as failed (the app broke mid-stream): what is queued is
/// dropped and the client sees the answer cut (HTTP/1.1: the connection closes without the
/// last chunk; HTTP/2: the stream is reset), never a complete-looking body.
/// `EMBER_EVENT_ABORTED` follows. The views are released as by `ember_response_end`.
#[no_mangle]
pub unsafe extern "C" fn ember_response_abort(req: ember_request) -> ember_result {
    guard(|| streaming::abort(req))
}

/// Blocks until a write would be taken (`EMBER_OK`), `timeout_ms` passes
/// (`EMBER_ERR_WOULD_BLOCK`; `EMBER_WAIT_FOREVER` = no limit), or the stream ended
/// (`EMBER_ERR_CLIENT_GONE`). `EMBER_ERR_STATE` on an I/O thread (inline dispatch): use
/// `EMBER_EVENT_WRITABLE` there.
#[no_mangle]
pub unsafe extern "C" fn ember_response_wait_writable(req: ember_request, timeout_ms: u32) -> ember_result {
    guard(|| match streaming::wait_writable(req, timeout(timeout_ms))? {
        true => Ok(()),
        false => Err(Error::new(ErrorKind::WouldBlock, format!("request {req:#x}: still no room after {timeout_ms} ms"))),
    })
}

/// Reads a streamed body (routes registered with `EMBER_ROUTE_STREAM_BODY`) into `buf`.
/// `*out_n` receives the byte count; 0 with `EMBER_OK` is the end of the body.
/// `timeout_ms` 0 never blocks (`EMBER_ERR_WOULD_BLOCK` when nothing is there yet;
/// `EMBER_EVENT_READABLE` follows); otherwise waits up to it (`EMBER_WAIT_FOREVER` = no
/// limit), never on an I/O thread (`EMBER_ERR_STATE`). A body over the limit:
/// `EMBER_ERR_TOO_LARGE` (the engine answered 413); too slow: `EMBER_ERR_TIMED_OUT` (408);
/// the client left: `EMBER_ERR_CLIENT_GONE`. `Expect: 100-continue` is answered at the
/// first read.
#[no_mangle]
pub unsafe extern "C" fn ember_request_read(req: ember_request, buf: *mut c_void, cap: usize, timeout_ms: u32, out_n: *mut usize) -> ember_result {
    guard(|| {
        if out_n.is_null() {
            return Err(args::null("out_n"));
        }
        if cap == 0 {
            return Err(Error::new(ErrorKind::InvalidArg, "cap must be at least 1"));
        }
        if buf.is_null() {
            return Err(args::null("buf"));
        }
        // SAFETY: the host promises `cap` writable bytes at `buf`.
        let dst = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), cap) };
        let n = streaming::read(req, dst, timeout(timeout_ms))?;
        write(out_n, "out_n", n)
    })
}

/// Calls `event(user_data, req, EMBER_EVENT_*)` for this request from now on, replacing an
/// earlier registration. The final event (`EMBER_EVENT_ABORTED`: the client left, the
/// handler timeout answered, the server stopped; or `EMBER_EVENT_COMPLETED`: the whole
/// answer went out) comes exactly once, last. On a request that already ended, this
/// returns why (`EMBER_ERR_TIMED_OUT`, `EMBER_ERR_CLIENT_GONE`, `EMBER_ERR_ALREADY_ANSWERED`)
/// and nothing is called.
///
/// Ownership: `user_data` stays the caller's; it must stay valid until the final event.
#[no_mangle]
pub unsafe extern "C" fn ember_request_on_event(req: ember_request, event: ember_event_fn, user_data: *mut c_void) -> ember_result {
    guard(|| {
        let f = event.ok_or_else(|| args::null("event"))?;
        let ud = UserData(user_data);
        let sink: EventSink = Arc::new(move |id: u64, ev: Event| {
            let ud = ud;
            // SAFETY: the host's callback with its own pointer.
            unsafe { f(ud.0, id, ev as i32) }
        });
        streaming::on_event(req, sink)
    })
}
