//! `ember_request_*`: read a request, answer it. Handles are tokens checked on every
//! call, so a stale or forged handle is an error code, never a crash.

use super::args::{self, c_str};
use super::boundary::guard;
use super::types::*;
use crate::error::{Error, ErrorKind, Result};
use crate::registry;
use crate::request::{RequestInfo, StrView};
use crate::response;
use bytes::Bytes;
use std::os::raw::{c_char, c_void};

/// Copies the request's info struct (the same one the handler received) into
/// `*out_info`. Its views are owned by the engine, valid as `ember_request_info` says.
///
/// `info_size` is `sizeof(ember_request_info)` as the caller knows it: at most that many
/// bytes are written, so a program built against an older header stays safe when fields
/// are appended. `out_info->size` tells how many the library filled.
#[no_mangle]
pub unsafe extern "C" fn ember_request_get_info(req: ember_request, out_info: *mut RequestInfo, info_size: usize) -> ember_result {
    guard(|| {
        if out_info.is_null() {
            return Err(args::null("out_info"));
        }
        let data = registry::data(req)?;
        args::write_sized(out_info, info_size, "out_info", *data.info())
    })
}

/// The first value of header `name` (ASCII case-insensitive) into `*out_value`;
/// `EMBER_ERR_NOT_FOUND` if absent. The view is owned by the engine, valid until answered.
#[no_mangle]
pub unsafe extern "C" fn ember_request_header(req: ember_request, name: *const c_char, out_value: *mut StrView) -> ember_result {
    guard(|| lookup(req, name, out_value, "header", |d, n| d.header_view(n)))
}

/// The value of route parameter `name` (percent-decoded) into `*out_value`;
/// `EMBER_ERR_NOT_FOUND` if the route has none by that name. Owned by the engine.
#[no_mangle]
pub unsafe extern "C" fn ember_request_param(req: ember_request, name: *const c_char, out_value: *mut StrView) -> ember_result {
    guard(|| lookup(req, name, out_value, "route parameter", |d, n| d.param_view(n)))
}

fn lookup(
    req: ember_request,
    name: *const c_char,
    out_value: *mut StrView,
    what: &str,
    find: impl Fn(&crate::request::RequestData, &str) -> Option<StrView>,
) -> Result<()> {
    let name = c_str(name, "name")?;
    if out_value.is_null() {
        return Err(args::null("out_value"));
    }
    let data = registry::data(req)?;
    let v = find(&data, name).ok_or_else(|| not_found(what, name))?;
    args::write(out_value, "out_value", v)
}

fn not_found(what: &str, name: &str) -> Error {
    Error::new(ErrorKind::NotFound, format!("the request has no {what} {name:?}"))
}

/// Answers a request: `status` (200-999), `headers` as "Name: value" lines separated by
/// "\r\n" or "\n" (NULL/0 for none), and a body. Content-Length is the engine's. Any
/// thread, once per request. Errors: `EMBER_ERR_ALREADY_ANSWERED`, `EMBER_ERR_TIMED_OUT`,
/// `EMBER_ERR_CLIENT_GONE`, `EMBER_ERR_INVALID_HANDLE`, `EMBER_ERR_INVALID_ARG` (then the
/// request still waits for a correct answer).
///
/// Ownership: `headers` and `body` are copied before this returns.
#[no_mangle]
pub unsafe extern "C" fn ember_request_respond(
    req: ember_request,
    status: u16,
    headers: *const c_char,
    headers_len: usize,
    body: *const c_void,
    body_len: usize,
) -> ember_result {
    guard(|| {
        let body = args::bytes(body.cast(), body_len, "body")?;
        deliver(req, status, headers, headers_len, || Bytes::copy_from_slice(body))
    })
}

/// Checks the head, claims the request (from here on no other answer gets in), sends.
/// The body is made only after the claim, so a copy is never wasted on a refused answer.
fn deliver(req: ember_request, status: u16, headers: *const c_char, headers_len: usize, body: impl FnOnce() -> Bytes) -> Result<()> {
    let head = args::bytes(headers.cast(), headers_len, "headers")?;
    let mut answer = response::answer(status, head, Bytes::new())?;
    let claim = registry::claim(req)?;
    // Set in place: a new `Answer` made from the old one was a copy of the whole value.
    answer.body = body();
    claim.send(answer)
}

/// Like `ember_request_respond`, but the body is not copied.
///
/// Ownership: `body` is lent until `release(release_data)` (NULL is fine) is called. It
/// is called exactly once, from any thread, whatever this returns — on failure before
/// this call returns. `headers` is copied.
#[no_mangle]
pub unsafe extern "C" fn ember_request_respond_nocopy(
    req: ember_request,
    status: u16,
    headers: *const c_char,
    headers_len: usize,
    body: *const c_void,
    body_len: usize,
    release: ember_release_fn,
    release_data: *mut c_void,
) -> ember_result {
    let owner = Release::new(release, UserData(release_data));
    guard(move || {
        let foreign = ForeignBody::lend(body.cast(), body_len, owner)?;
        deliver(req, status, headers, headers_len, || Bytes::from_owner(foreign))
    })
}
