//! The C ABI driven by an op-sequence interpreter: random calls, in random orders, with
//! NULLs, odd lengths, non-UTF-8 strings and stale or forged request handles.
//!
//! Pointers are either NULL or valid (a host that passes a wild pointer breaks the
//! contract; no library can survive that). Everything else is random. Invariants:
//! - no call crashes, hangs (libFuzzer's -timeout) or panics (libfuzzer-sys aborts on any
//!   panic, also one the boundary would catch); no call returns `EMBER_ERR_PANIC`;
//! - every result is a known code; `ember_last_error` and `ember_result_name` are strings;
//! - a required NULL argument gives `EMBER_ERR_NULL`;
//! - a request is accepted for an answer at most once;
//! - handles from servers already freed are never accepted;
//! - after `ember_server_free` returns, none of its callbacks (handler, release, log,
//!   thread hooks) runs again; each route's release runs exactly once, and each
//!   `respond_nocopy` release exactly once (and before the call returns when it fails);
//! - a lent body stays readable until its release (ASan watches the engine's reads).
#![no_main]

mod callbacks;
mod interp;
mod ops;
mod requests;
mod streams;

use arbitrary::Arbitrary;
use callbacks::*;
use interp::*;
use libfuzzer_sys::fuzz_target;
use ops::*;
use ember::ffi::constants::{EMBER_WS_BINARY, EMBER_WS_TEXT};
use std::sync::atomic::Ordering::SeqCst;

/// A known-good sequence (ABI_FUZZ_DEMO=1 runs it before each input): shows in the
/// trace that the request ops really reach live requests.
pub fn demo() -> Vec<Op> {
    vec![
        Op::Quickstart { kind: Kind::Defer, inline: true, pattern: 1, sends: 1, extras: 3 },
        Op::Param(H::Seen(0), Some(Str(b"id".to_vec())), false),
        Op::GetInfo(H::Seen(0), false, Size::Full),
        Op::Respond { h: H::Seen(0), status: Status::Ok, headers: Headers::Plain, body: None },
        Op::Respond { h: H::Seen(0), status: Status::Ok, headers: Headers::Plain, body: None },
        // A streamed answer: begin, write (copied and lent), end, with events.
        Op::Send { srv: Srv::Nth(0), post: false, path: PathSel::Route(0), body: vec![] },
        Op::Stream(StreamOp::OnEvent(H::Seen(1), false)),
        Op::Stream(StreamOp::Begin { h: H::Seen(1), status: Status::Ok, headers: Headers::Plain }),
        Op::Stream(StreamOp::Write { h: H::Seen(1), body: Some(Buf { bytes: b"part".to_vec(), null: false }) }),
        Op::Stream(StreamOp::WriteNocopy { h: H::Seen(1), body: Some(Buf { bytes: b"lent".to_vec(), null: false }), null_release: false }),
        Op::Stream(StreamOp::End(H::Seen(1))),
        // A WebSocket endpoint on a second server, and a client's handshake.
        Op::New,
        Op::ListenLoopback(Srv::Nth(1)),
        Op::Stream(StreamOp::WebSocket { srv: Srv::Nth(1), pattern: Some(Str(b"/ws".to_vec())), size: Size::Full, null_open: false, null_message: false, null_release: false }),
        Op::Start(Srv::Nth(1)),
        Op::Upgrade { srv: Srv::Nth(1), path: PathSel::Route(0) },
        Op::Stream(StreamOp::WsAccept(W::Seen(0), Headers::None)),
        Op::Stream(StreamOp::WsSend { ws: W::Seen(0), kind: EMBER_WS_TEXT, data: Some(Buf { bytes: b"hi".to_vec(), null: false }) }),
        Op::Stream(StreamOp::WsJoin(W::Seen(0), Some(Str(b"g".to_vec())))),
        Op::Stream(StreamOp::Broadcast { srv: Srv::Nth(1), group: Some(Str(b"g".to_vec())), kind: EMBER_WS_BINARY, data: None, except: W::Forged(0), null_out: false }),
        Op::Stream(StreamOp::WsClose { ws: W::Seen(0), code: 1000, reason: None }),
    ]
}

#[derive(Arbitrary, Debug)]
struct Input {
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| {
    // The engine ignores SIGPIPE once a server starts; the harness may write to a closed
    // socket before that.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let mut run = Run { servers: Vec::new(), routes: Vec::new(), lent: Vec::new(), ws: Vec::new(), clients: Vec::new() };
    if std::env::var_os("ABI_FUZZ_DEMO").is_some() {
        for op in demo() {
            exec(&mut run, &op);
        }
    }
    for op in input.ops.iter().take(48) {
        exec(&mut run, op);
    }
    for server in std::mem::take(&mut run.servers) {
        free(&server);
    }
    run.clients.clear();
    for rec in &run.routes {
        assert_eq!(rec.released.load(SeqCst), 1, "a route's release did not run exactly once by free");
    }
    for lent in &run.lent {
        assert_eq!(lent.released.load(SeqCst), 1, "a lent body was not released exactly once by free");
    }
    // Known gap, reported to the lead (tests/abi_callbacks.rs, ignored test): with a
    // connection accepted and open at free, the endpoint's release never runs. So "exactly
    // once" is checked for inputs that opened no connection; "never twice" always.
    let opened = !streams::WS_SEEN.lock().unwrap().is_empty();
    for rec in &run.ws {
        let n = rec.released.load(SeqCst);
        assert!(n <= 1, "a WebSocket endpoint's release ran {n} times");
        if !opened {
            assert_eq!(n, 1, "a WebSocket endpoint's release did not run by free");
        }
    }
    streams::reset();
    // Keep a few handles of this input to try on later inputs, where they are stale.
    let mut shared = SHARED.lock().unwrap();
    let mut old = OLD.lock().unwrap();
    old.extend(shared.handles.iter().take(4));
    let excess = old.len().saturating_sub(64);
    old.drain(..excess);
    *shared = Shared::default();
});
