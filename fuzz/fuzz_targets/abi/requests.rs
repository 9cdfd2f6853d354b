//! The request-level operations: reading requests and answering them by handle.

use crate::callbacks::*;
use crate::interp::*;
use crate::ops::*;
use ember::ffi::constants::*;
use ember::ffi::request::*;
use ember::ffi::types::*;
use ember::request::{RequestInfo, StrView};
use std::ffi::c_void;

use std::sync::Arc;

pub fn exec(run: &mut Run, op: &Op) {
    match op {
        Op::GetInfo(h, null, size) => {
            let id = run.handle(*h);
            let (rc, info) = sized_call::<RequestInfo>(*null, *size, |p, n| unsafe { ember_request_get_info(id, p, n) });
            check(rc, "get_info");
            if *null {
                assert_eq!(rc, EMBER_ERR_NULL);
            }
            if let Some(info) = info {
                assert_eq!(info.id, id);
                touch_info(&info);
            }
            old_refused(*h, rc);
        }
        Op::Header(h, name, null) | Op::Param(h, name, null) => {
            let id = run.handle(*h);
            let name = name.as_ref().map(Str::c);
            let np = name.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
            let mut v = StrView::EMPTY;
            let out = out_ptr(&mut v, *null);
            let rc = if matches!(op, Op::Header(..)) {
                check(unsafe { ember_request_header(id, np, out) }, "header")
            } else {
                check(unsafe { ember_request_param(id, np, out) }, "param")
            };
            // With two bad arguments either error is right; a NULL alone must say NULL.
            if name.is_none() || (*null && name.as_ref().is_some_and(|n| n.to_str().is_ok())) {
                assert_eq!(rc, EMBER_ERR_NULL);
            }
            if rc == EMBER_OK {
                view(v);
            }
            old_refused(*h, rc);
        }
        Op::Respond { h, status, headers, body } => {
            let id = run.handle(*h);
            let headers = headers.buf();
            let (hp, hl) = buf(&headers);
            let (bp, bl) = buf(body);
            let rc = check(unsafe { ember_request_respond(id, status.code(), hp.cast(), hl, bp.cast(), bl) }, "respond");
            if (hp.is_null() && hl > 0) || (bp.is_null() && bl > 0) {
                assert_eq!(rc, EMBER_ERR_NULL);
            }
            answered(id, rc);
            old_refused(*h, rc);
        }
        Op::RespondNocopy { h, status, headers, body, null_release } => {
            let id = run.handle(*h);
            let headers = headers.buf();
            let (hp, hl) = buf(&headers);
            let lent = lend(body);
            let (bp, bl) = match body {
                Some(Buf { null: true, bytes }) => (std::ptr::null(), bytes.len()),
                _ => (lent.body.as_ptr(), lent.body.len()),
            };
            let release: ember_release_fn = if *null_release { None } else { Some(body_release) };
            let rc = check(
                unsafe { ember_request_respond_nocopy(id, status.code(), hp.cast(), hl, bp.cast(), bl, release, Arc::as_ptr(&lent) as *mut c_void) },
                "respond_nocopy",
            );
            settle_lent(&lent, *null_release, rc, "respond_nocopy");
            answered(id, rc);
            old_refused(*h, rc);
            run.lent.push(lent);
        }
        _ => unreachable!("not a request operation"),
    }
}

/// No answer is ever accepted twice.
pub fn answered(id: u64, rc: ember_result) {
    if rc != EMBER_OK {
        return;
    }
    let mut shared = SHARED.lock().unwrap();
    assert!(!shared.answered.contains(&id), "request {id:#x} was accepted for an answer twice");
    shared.answered.push(id);
}

/// A handle from an input whose servers are all freed is never accepted.
pub fn old_refused(h: H, rc: ember_result) {
    if matches!(h, H::Old(_)) {
        assert_ne!(rc, EMBER_OK, "a handle of a freed server was accepted");
    }
}
