//! The interpreter: the servers and clients of one input, and the server-level
//! operations (request-level ones are in `requests`).

use crate::callbacks::*;
use crate::ops::*;
use ember::ffi::constants::*;
use ember::ffi::errors::*;
use ember::ffi::server::*;
use ember::ffi::types::*;
use ember::Stats;
use std::ffi::{c_void, CStr};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};
use crate::requests;

pub struct Server {
    pub slot: Arc<Slot>,
    /// Patterns registered here (for requests that hit them).
    pub patterns: Vec<String>,
}

pub struct Run {
    pub servers: Vec<Server>,
    /// Every route record and lent body of this input; freed only after every server is.
    pub routes: Vec<Arc<RouteRec>>,
    pub lent: Vec<Arc<Lent>>,
    pub ws: Vec<Arc<crate::streams::WsRec>>,
    pub clients: Vec<TcpStream>,
}

impl Run {
    /// The server a seen request handle belongs to.
    pub fn owner(&self, id: u64) -> Option<Arc<Slot>> {
        SHARED.lock().unwrap().owners.iter().find(|(h, _)| *h == id).map(|(_, s)| s.clone())
    }

    pub fn server(&self, s: Srv) -> Option<&Server> {
        match s {
            Srv::Nth(_) if self.servers.is_empty() => None,
            Srv::Nth(n) => Some(&self.servers[n as usize % self.servers.len()]),
            Srv::Null => None,
        }
    }

    pub fn ptr(&self, s: Srv) -> *mut ember_server {
        self.server(s).map_or(std::ptr::null_mut(), |x| x.slot.ptr)
    }

    pub fn handle(&self, h: H) -> u64 {
        let shared = SHARED.lock().unwrap();
        match h {
            H::Seen(i) if !shared.handles.is_empty() => shared.handles[i as usize % shared.handles.len()],
            H::Mangled(i, how) if !shared.handles.is_empty() => {
                let id = shared.handles[i as usize % shared.handles.len()];
                match how % 4 {
                    0 => id.wrapping_add(1 << 32),
                    1 => id ^ (1 << 24),
                    2 => id ^ 0x00ff_ffff,
                    _ => id | 0xf0 << 24,
                }
            }
            H::Old(i) => {
                let old = OLD.lock().unwrap();
                if old.is_empty() { 0 } else { old[i as usize % old.len()] }
            }
            H::Forged(x) => x,
            _ => 0,
        }
    }
}

pub fn out_ptr<T>(slot: &mut T, null: bool) -> *mut T {
    if null { std::ptr::null_mut() } else { slot }
}

/// A buffer argument: (pointer, length).
pub fn buf(b: &Option<Buf>) -> (*const u8, usize) {
    match b {
        None => (std::ptr::null(), 0),
        Some(Buf { bytes, null: true }) => (std::ptr::null(), bytes.len()),
        Some(Buf { bytes, null: false }) => (bytes.as_ptr(), bytes.len()),
    }
}

/// Only addresses that bind nothing outside this machine, on a port the kernel picks.
pub fn listen_ok(text: &[u8]) -> bool {
    match std::str::from_utf8(text).ok().and_then(|t| t.trim().parse::<SocketAddr>().ok()) {
        Some(a) => a.ip().is_loopback() && a.port() == 0,
        None => true,
    }
}

pub fn fill(pattern: &str) -> String {
    let mut out = String::new();
    let mut in_param = false;
    for ch in pattern.chars() {
        match ch {
            '{' => {
                in_param = true;
                out.push('p');
            }
            '}' => in_param = false,
            _ if in_param => {}
            c if c.is_ascii_graphic() => out.push(c),
            c => {
                let mut b = [0u8; 4];
                for byte in c.encode_utf8(&mut b).bytes() {
                    out.push_str(&format!("%{byte:02X}"));
                }
            }
        }
    }
    out
}

pub fn port_of(slot: &Slot) -> Option<u16> {
    let mut port = 0u16;
    (unsafe { ember_server_port(slot.ptr, 0, &mut port) } == EMBER_OK).then_some(port)
}

const UPGRADE: &str = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";

pub fn send(run: &mut Run, srv: Srv, post: bool, path: &PathSel, body: &[u8]) {
    send_with(run, srv, if post { "POST" } else { "GET" }, "", path, body)
}

fn send_with(run: &mut Run, srv: Srv, method: &str, extra: &str, path: &PathSel, body: &[u8]) {
    let Some(server) = run.server(srv) else { return };
    let Some(port) = port_of(&server.slot) else { return };
    let target = match path {
        PathSel::Route(n) if !server.patterns.is_empty() => fill(&server.patterns[*n as usize % server.patterns.len()]),
        PathSel::Route(_) => "/".to_owned(),
        PathSel::Raw(raw) => {
            // Printable ASCII only: the request head stays well-formed; the path is random.
            let p: String = raw.iter().take(64).map(|b| (b'!' + b % 94) as char).collect();
            format!("/{p}")
        }
    };
    let Ok(mut c) = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)) else { return };
    let head = format!("{method} {target} HTTP/1.1\r\nHost: fuzz\r\nX-Fuzz: 1\r\n{extra}Content-Length: {}\r\n\r\n", body.len());
    let before = HANDLER_CALLS.load(SeqCst);
    let _ = c.write_all(head.as_bytes());
    let _ = c.write_all(body);
    // Until the handler ran, the engine answered on its own, or a short while passed.
    let _ = c.set_nonblocking(true);
    let deadline = Instant::now() + Duration::from_millis(100);
    let mut probe = [0u8; 1];
    while Instant::now() < deadline && HANDLER_CALLS.load(SeqCst) == before {
        match c.peek(&mut probe) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_micros(200)),
            Err(_) => break,
        }
    }
    run.clients.push(c);
    if run.clients.len() > 16 {
        run.clients.remove(0);
    }
}

pub const PATTERNS: [&str; 4] = ["/", "/users/{id}", "/files/{*rest}", "/st\u{e4}dte/{name}"];

pub fn exec(run: &mut Run, op: &Op) {
    if trace() {
        eprintln!("op {op:?}");
    }
    match op {
        Op::Quickstart { kind, inline, pattern, sends, extras } => {
            exec(run, &Op::New);
            let srv = Srv::Nth((run.servers.len().max(1) - 1) as u8);
            let p = PATTERNS[*pattern as usize % PATTERNS.len()];
            exec(run, &Op::ListenLoopback(srv));
            exec(run, &Op::SetWorkers(srv, 1));
            exec(run, &Op::SetPoolThreads(srv, 2));
            exec(run, &Op::SetDispatch(srv, if *inline { EMBER_DISPATCH_INLINE } else { EMBER_DISPATCH_POOL }));
            if extras & 1 != 0 {
                exec(run, &Op::SetLog(srv, false, EMBER_LOG_DEBUG));
            }
            if extras & 2 != 0 {
                exec(run, &Op::SetHooks(srv, true, true));
            }
            let route = Op::Route { srv, method: None, pattern: Some(Str(p.as_bytes().to_vec())), kind: *kind, null_handler: false, null_release: false };
            exec(run, &route);
            if extras & 4 != 0 {
                let ws = StreamOp::WebSocket { srv, pattern: Some(Str(b"/ws".to_vec())), size: Size::Full, null_open: false, null_message: false, null_release: false };
                exec(run, &Op::Stream(ws));
            }
            if extras & 8 != 0 {
                exec(run, &Op::Stream(StreamOp::RouteFlags { srv, pattern: *pattern, flags: EMBER_ROUTE_STREAM_BODY }));
            }
            exec(run, &Op::Start(srv));
            if extras & 4 != 0 {
                let ws_index = run.server(srv).map_or(0, |s| s.patterns.iter().position(|p| p == "/ws").unwrap_or(0));
                exec(run, &Op::Upgrade { srv, path: PathSel::Route(ws_index as u8) });
            }
            for _ in 0..sends % 4 {
                exec(run, &Op::Send { srv, post: false, path: PathSel::Route(0), body: Vec::new() });
            }
        }
        Op::New => {
            if run.servers.len() >= 3 {
                return;
            }
            let mut p: *mut ember_server = std::ptr::null_mut();
            if check(unsafe { ember_server_new(&mut p) }, "new") == EMBER_OK {
                assert!(!p.is_null());
                run.servers.push(Server { slot: Arc::new(Slot { ptr: p, freed: AtomicBool::new(false) }), patterns: Vec::new() });
            }
        }
        Op::Free(srv) => {
            let Some(i) = (match srv {
                Srv::Nth(n) if !run.servers.is_empty() => Some(*n as usize % run.servers.len()),
                _ => None,
            }) else {
                assert_eq!(check(unsafe { ember_server_free(std::ptr::null_mut()) }, "free NULL"), EMBER_OK);
                return;
            };
            let server = run.servers.remove(i);
            free(&server);
        }
        Op::Listen(srv, text) => {
            if !listen_ok(&text.0) {
                return;
            }
            let c = text.c();
            check(unsafe { ember_server_listen(run.ptr(*srv), c.as_ptr()) }, "listen");
        }
        Op::ListenLoopback(srv) => {
            check(unsafe { ember_server_listen(run.ptr(*srv), c"127.0.0.1:0".as_ptr()) }, "listen");
        }
        // Counts above the ABI's 1024 must be refused; accepted ones stay small, since the
        // machine is shared.
        Op::SetWorkers(srv, n) => {
            let n = if *n > 1024 { *n } else { *n % 3 };
            let rc = check(unsafe { ember_server_set_workers(run.ptr(*srv), n) }, "set_workers");
            if n > 1024 && !run.ptr(*srv).is_null() {
                assert_eq!(rc, EMBER_ERR_INVALID_ARG);
            }
        }
        Op::SetDispatch(srv, mode) => {
            let rc = check(unsafe { ember_server_set_dispatch(run.ptr(*srv), *mode) }, "set_dispatch");
            if !(0..=1).contains(mode) && !run.ptr(*srv).is_null() {
                assert_eq!(rc, EMBER_ERR_INVALID_ARG);
            }
        }
        Op::SetPoolThreads(srv, n) => {
            let n = if *n > 1024 { *n } else { *n % 4 };
            let rc = check(unsafe { ember_server_set_pool_threads(run.ptr(*srv), n) }, "set_pool_threads");
            if n > 1024 && !run.ptr(*srv).is_null() {
                assert_eq!(rc, EMBER_ERR_INVALID_ARG);
            }
        }
        Op::SetLimit(srv, limit, value) => {
            let v = match value {
                LimitValue::Small(v) => *v as u64,
                LimitValue::Zero => 0,
                LimitValue::Max => u64::MAX,
                LimitValue::Any(v) => *v,
            };
            // Limits 1..=11 exist; try the real ones most of the time.
            let limit = if (0..=12).contains(limit) { *limit } else { limit % 13 };
            check(unsafe { ember_server_set_limit(run.ptr(*srv), limit, v) }, "set_limit");
        }
        Op::SetLog(srv, null_fn, level) => {
            let (f, ud): (ember_log_fn, *mut c_void) = match run.server(*srv) {
                Some(s) if !*null_fn => (Some(log_sink), Arc::as_ptr(&s.slot) as *mut c_void),
                _ => (None, std::ptr::null_mut()),
            };
            check(unsafe { ember_server_set_log(run.ptr(*srv), f, ud, *level) }, "set_log");
        }
        Op::SetHooks(srv, start, stop) => {
            let ud = run.server(*srv).map_or(std::ptr::null_mut(), |s| Arc::as_ptr(&s.slot) as *mut c_void);
            let hook = |on: bool| -> ember_thread_fn { if on { Some(thread_hook) } else { None } };
            check(unsafe { ember_server_set_thread_hooks(run.ptr(*srv), hook(*start), hook(*stop), ud) }, "set_thread_hooks");
        }
        Op::Route { srv, method, pattern, kind, null_handler, null_release } => {
            let Some(server) = run.server(*srv) else {
                let rc = check(unsafe { ember_server_route(std::ptr::null_mut(), std::ptr::null(), c"/".as_ptr(), Some(handler), std::ptr::null_mut(), None) }, "route");
                assert_eq!(rc, EMBER_ERR_NULL);
                return;
            };
            let rec = Arc::new(RouteRec { server: server.slot.clone(), kind: *kind, released: AtomicU32::new(0), taken: AtomicBool::new(false) });
            let m = method.as_ref().map(Str::c);
            let p = pattern.as_ref().map(Str::c);
            let ptr = server.slot.ptr;
            // Marked taken before the call: a release during the call is only wrong if it fails.
            rec.taken.store(true, SeqCst);
            let rc = check(
                unsafe {
                    ember_server_route(
                        ptr,
                        m.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                        p.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                        if *null_handler { None } else { Some(handler) },
                        Arc::as_ptr(&rec) as *mut c_void,
                        if *null_release { None } else { Some(route_release) },
                    )
                },
                "route",
            );
            // (A bad method is checked first, so only without one is the answer certain.)
            let pattern_utf8 = p.as_ref().is_some_and(|c| c.to_str().is_ok());
            if method.is_none() && (pattern.is_none() || (*null_handler && pattern_utf8)) {
                assert_eq!(rc, EMBER_ERR_NULL, "route with a NULL pattern or handler");
            }
            if rc == EMBER_OK {
                if *null_release {
                    rec.released.store(1, SeqCst);
                }
                let text = p.unwrap().into_string().unwrap();
                run.servers.iter_mut().find(|s| s.slot.ptr == ptr).unwrap().patterns.push(text);
            } else {
                assert_eq!(rec.released.load(SeqCst), 0, "a failed registration called release");
                rec.taken.store(false, SeqCst);
                // Nothing else may call it either: count it as done.
                rec.released.store(1, SeqCst);
            }
            run.routes.push(rec);
        }
        Op::Start(srv) => {
            check(unsafe { ember_server_start(run.ptr(*srv)) }, "start");
        }
        Op::Port(srv, index, null) => {
            let mut port = 0u16;
            let rc = check(unsafe { ember_server_port(run.ptr(*srv), *index as usize, out_ptr(&mut port, *null)) }, "port");
            if rc == EMBER_OK {
                assert_ne!(port, 0);
            }
        }
        Op::Stop(srv, ms) => {
            check(unsafe { ember_server_stop(run.ptr(*srv), *ms as u32) }, "stop");
        }
        Op::Wait(srv, ms) => {
            check(unsafe { ember_server_wait(run.ptr(*srv), *ms as u32 % 50) }, "wait");
        }
        Op::Stats(srv, null, size) => {
            let (rc, _) = sized_call::<Stats>(*null, *size, |p, n| unsafe { ember_server_stats(run.ptr(*srv), p, n) });
            check(rc, "stats");
        }
        Op::ListenFlags(srv, flags) => {
            let rc = check(unsafe { ember_server_listen_flags(run.ptr(*srv), c"127.0.0.1:0".as_ptr(), *flags) }, "listen_flags");
            if *flags & !EMBER_LISTEN_REUSE_PORT != 0 && !run.ptr(*srv).is_null() {
                assert_eq!(rc, EMBER_ERR_INVALID_ARG, "unknown listen flags {flags:#x} were accepted");
            }
        }
        Op::Send { srv, post, path, body } => send(run, *srv, *post, path, &body[..body.len().min(4096)]),
        Op::Upgrade { srv, path } => send_with(run, *srv, "GET", UPGRADE, path, &[]),
        Op::Stream(s) => crate::streams::exec(run, s),
        Op::DropClient(i) => {
            if !run.clients.is_empty() {
                let i = *i as usize % run.clients.len();
                run.clients.remove(i);
            }
        }
        Op::GetInfo(..) | Op::Header(..) | Op::Param(..) | Op::Respond { .. } | Op::RespondNocopy { .. } => requests::exec(run, op),
        Op::LastError => {
            last_error();
        }
        Op::LastErrorCopy(cap, null_buf, null_len) => {
            let before = last_error();
            let mut b = vec![0x55u8; *cap as usize];
            let mut n = usize::MAX;
            let bp = if *null_buf { std::ptr::null_mut() } else { b.as_mut_ptr().cast() };
            let rc = unsafe { ember_last_error_copy(bp, *cap as usize, out_ptr(&mut n, *null_len)) };
            assert!(known(rc) && rc != EMBER_ERR_PANIC);
            if !*null_len {
                assert_eq!(n, before.len());
            }
            if *cap > 0 && !*null_buf {
                let copied = CStr::from_bytes_until_nul(&b).expect("the copy is NUL-terminated");
                assert!(before.as_bytes().starts_with(copied.to_bytes()));
            }
            assert_eq!(last_error(), before, "ember_last_error_copy changed the last error");
        }
        Op::ResultName(code) => {
            let p = ember_result_name(*code);
            assert!(!p.is_null());
            let name = unsafe { CStr::from_ptr(p) }.to_str().unwrap();
            assert!(name.starts_with("EMBER_"));
            if known(*code) {
                assert_ne!(name, "EMBER_ERR_UNKNOWN");
            }
        }
        Op::Version => {
            let v = unsafe { CStr::from_ptr(ember_version()) };
            assert!(!v.to_bytes().is_empty());
            assert_eq!(ember_abi_version(), EMBER_ABI_VERSION);
        }
    }
}

pub fn free(server: &Server) {
    let t = Instant::now();
    assert_eq!(check(unsafe { ember_server_free(server.slot.ptr) }, "free"), EMBER_OK);
    assert!(t.elapsed() < Duration::from_secs(10), "free took {:?}", t.elapsed());
    server.slot.freed.store(true, SeqCst);
}
