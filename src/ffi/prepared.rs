//! `ember_answer_*` and the cheap ways to answer a request: a prepared answer (built
//! once, sent many times) and a one-call small answer. They exist for hosts whose every
//! call is expensive (Python ctypes, P/Invoke): fewer arguments, no header block to parse.

use super::args;
use super::boundary::guard;
use super::types::*;
use crate::prepared::{self, Prepared};
use crate::registry;
use bytes::Bytes;
use std::os::raw::{c_char, c_void};

/// A prepared answer handle: a generation-checked token (never 0), not a pointer. After
/// `ember_answer_free` every use of it returns `EMBER_ERR_INVALID_HANDLE`.
pub type ember_answer = u64;

/// Builds an answer once for many requests: `status` (200-999), `headers` as for
/// `ember_request_respond` (NULL/0 for none) and a body. Checked now, so answering with
/// it later fails only for reasons of the request. The handle goes to `*out_answer`
/// (untouched on failure).
///
/// Ownership: `headers` and `body` are copied before this returns. The answer belongs to
/// the library; the host ends it with `ember_answer_free` exactly once, from any thread,
/// also while requests are being answered with it. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn ember_answer_new(
    status: u16,
    headers: *const c_char,
    headers_len: usize,
    body: *const c_void,
    body_len: usize,
    out_answer: *mut ember_answer,
) -> ember_result {
    guard(|| {
        if out_answer.is_null() {
            return Err(args::null("out_answer"));
        }
        let head = args::bytes(headers.cast(), headers_len, "headers")?;
        let body = args::bytes(body.cast(), body_len, "body")?;
        let id = prepared::insert(Prepared::new(status, head, Bytes::copy_from_slice(body))?)?;
        args::write(out_answer, "out_answer", id)
    })
}

/// Frees a prepared answer. Requests already answered with it still get their whole body.
/// `EMBER_ERR_INVALID_HANDLE` if `answer` is 0, freed already, or not from
/// `ember_answer_new`.
#[no_mangle]
pub extern "C" fn ember_answer_free(answer: ember_answer) -> ember_result {
    guard(|| prepared::remove(answer))
}

/// Answers `req` with a prepared answer, as `ember_request_respond` would with its
/// status, headers and body; the body is shared, not copied. Any thread, once per request.
/// Errors: those of `ember_request_respond`, and `EMBER_ERR_INVALID_HANDLE` for a freed or
/// unknown `answer` (then the request still waits for an answer).
///
/// Ownership: nothing changes hands; `answer` stays the host's to free.
#[no_mangle]
pub extern "C" fn ember_request_respond_answer(req: ember_request, answer: ember_answer) -> ember_result {
    guard(|| {
        let p = prepared::get(answer)?;
        registry::claim(req)?.send(p.answer())
    })
}

/// Answers `req` in one call with `status` (200-999), a Content-Type (`content_type`,
/// `content_type_len` bytes, not NUL-terminated; 0 = no Content-Type) and a body: the
/// usual small answer without a header block to build and parse. Same errors as
/// `ember_request_respond` (a bad status or content type is `EMBER_ERR_INVALID_ARG` and
/// the request still waits). NULL is fine for a pointer whose length is 0.
///
/// Ownership: `content_type` and `body` are copied before this returns.
#[no_mangle]
pub unsafe extern "C" fn ember_request_respond_small(
    req: ember_request,
    status: u16,
    content_type: *const c_char,
    content_type_len: u32,
    body: *const c_void,
    body_len: u32,
) -> ember_result {
    guard(|| {
        let ctype = args::bytes(content_type.cast(), content_type_len as usize, "content_type")?;
        let body = args::bytes(body.cast(), body_len as usize, "body")?;
        let answer = prepared::small(status, ctype, Bytes::new())?;
        // The body is copied only once the request is ours: a refused answer copies nothing.
        let claim = registry::claim(req)?;
        claim.send(crate::request::Answer { body: Bytes::copy_from_slice(body), ..answer })
    })
}
