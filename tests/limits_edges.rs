//! Extreme option values, through the C ABI and the Rust API: refused with an error, or
//! meaning what a host would expect; never a crash or a server that closes everything.

mod common;
use common::*;
use ember::ffi::constants::*;
use ember::ffi::request::ember_request_respond;
use ember::ffi::server::*;
use ember::ffi::types::ember_request;
use ember::request::RequestInfo;
use ember::Dispatch;
use std::ffi::c_void;
use std::time::Duration;

unsafe extern "C" fn hello(_ud: *mut c_void, req: ember_request, _info: *const RequestInfo) {
    ember_request_respond(req, 200, std::ptr::null(), 0, b"hello".as_ptr().cast(), 5);
}

/// A started server with one route; `setup` runs before start.
fn abi_server(setup: impl FnOnce(*mut ember_server)) -> (*mut ember_server, u16) {
    let mut s: *mut ember_server = std::ptr::null_mut();
    unsafe {
        assert_eq!(ember_server_new(&mut s), EMBER_OK);
        assert_eq!(ember_server_listen(s, c"127.0.0.1:0".as_ptr()), EMBER_OK);
        assert_eq!(ember_server_set_workers(s, 1), EMBER_OK);
        assert_eq!(ember_server_route(s, c"GET".as_ptr(), c"/".as_ptr(), Some(hello), std::ptr::null_mut(), None), EMBER_OK);
        setup(s);
        assert_eq!(ember_server_start(s), EMBER_OK);
        let mut port = 0u16;
        assert_eq!(ember_server_port(s, 0, &mut port), EMBER_OK);
        (s, port)
    }
}

#[test]
fn timeouts_of_u64_max_through_the_abi_mean_forever_not_at_once() {
    // The deadline sums wrapped: every connection was closed at once (release build), or
    // the connection task panicked on the overflow (debug build).
    let (s, port) = abi_server(|s| unsafe {
        for limit in [EMBER_LIMIT_HEADER_TIMEOUT_MS, EMBER_LIMIT_IDLE_TIMEOUT_MS, EMBER_LIMIT_HANDLER_TIMEOUT_MS] {
            assert_eq!(ember_server_set_limit(s, limit, u64::MAX), EMBER_OK);
        }
    });
    let resp = get(port, "/");
    assert!(resp.starts_with("HTTP/1.1 200") && resp.ends_with("hello"), "got {resp:?}");
    unsafe { assert_eq!(ember_server_free(s), EMBER_OK) };
}

#[test]
fn counts_the_engine_allocates_for_up_front_are_capped() {
    // Each of these used to be accepted and then abort the process (or, smaller, cost that
    // much memory): the runtime, the parser and the pool queue allocate by these counts up
    // front, and a failed allocation aborts.
    let mut s: *mut ember_server = std::ptr::null_mut();
    unsafe {
        assert_eq!(ember_server_new(&mut s), EMBER_OK);
        assert_eq!(ember_server_set_workers(s, u32::MAX), EMBER_ERR_INVALID_ARG);
        assert_eq!(ember_server_set_workers(s, 1025), EMBER_ERR_INVALID_ARG);
        assert_eq!(ember_server_set_workers(s, 1024), EMBER_OK);
        assert_eq!(ember_server_set_pool_threads(s, u32::MAX), EMBER_ERR_INVALID_ARG);
        assert_eq!(ember_server_set_pool_threads(s, 1024), EMBER_OK);
        assert_eq!(ember_server_set_limit(s, EMBER_LIMIT_MAX_HEADERS, 1 << 40), EMBER_ERR_INVALID_ARG);
        assert_eq!(ember_server_set_limit(s, EMBER_LIMIT_MAX_HEADERS, 10_001), EMBER_ERR_INVALID_ARG);
        assert_eq!(ember_server_set_limit(s, EMBER_LIMIT_MAX_HEADERS, 10_000), EMBER_OK);
        assert_eq!(ember_server_set_limit(s, EMBER_LIMIT_MAX_HEADER_BYTES, u64::MAX), EMBER_ERR_INVALID_ARG);
        assert_eq!(ember_server_set_limit(s, EMBER_LIMIT_MAX_HEADER_BYTES, 64 << 20), EMBER_OK);
        // The pool's queue is a bounded channel whose slots are allocated at start.
        assert_eq!(ember_server_set_limit(s, EMBER_LIMIT_MAX_QUEUED, 1 << 40), EMBER_ERR_INVALID_ARG);
        assert_eq!(ember_server_set_limit(s, EMBER_LIMIT_MAX_QUEUED, 1 << 20), EMBER_OK);
        let msg = std::ffi::CStr::from_ptr(ember::ffi::errors::ember_last_error()).to_string_lossy().into_owned();
        assert!(msg.is_empty() || msg.contains("at most"), "{msg}");
        assert_eq!(ember_server_free(s), EMBER_OK);
    }
}

#[test]

fn timeouts_of_u64_max_through_the_rust_api_mean_forever_not_at_once() {
    let (_s, port) = server(Dispatch::Inline, |s| {
        s.set_limits(|l| {
            l.header_timeout = Duration::from_millis(u64::MAX);
            l.idle_timeout = Duration::from_millis(u64::MAX);
            Ok(())
        })
        .unwrap();
    });
    let resp = get(port, "/");
    assert!(resp.starts_with("HTTP/1.1 200"), "got {resp:?}");
}
