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

use arbitrary::Arbitrary;
use callbacks::*;
use interp::*;
use libfuzzer_sys::fuzz_target;
use ops::*;
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
    let mut run = Run { servers: Vec::new(), routes: Vec::new(), lent: Vec::new(), clients: Vec::new() };
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
    // Keep a few handles of this input to try on later inputs, where they are stale.
    let mut shared = SHARED.lock().unwrap();
    let mut old = OLD.lock().unwrap();
    old.extend(shared.handles.iter().take(4));
    let excess = old.len().saturating_sub(64);
    old.drain(..excess);
    *shared = Shared::default();
});
