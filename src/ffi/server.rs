//! `ember_server_*`: create, configure, register, start, stop, free.
//!
//! Lifecycle: 1. `ember_server_new` 2. options and `ember_server_listen` 3. `ember_server_route`
//! 4. `ember_server_start` 5. `ember_server_stop` 6. `ember_server_free`.

use super::args::{self, c_str, non_null};
use super::boundary::guard;
use super::constants::*;
use super::types::*;
use crate::config::Dispatch;
use crate::dispatch::Hooks;
use crate::error::{Error, ErrorKind, Result};
use crate::handler::{Handler, Request};
use crate::log::{Level, Logger};
use crate::server::Server;
use crate::stats::Stats;
use std::os::raw::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

/// An HTTP server (opaque). Create with `ember_server_new`, free with `ember_server_free`.
/// Every function taking it is safe to call from any thread.
pub struct ember_server {
    server: Arc<Server>,
}

pub(crate) fn get<'a>(p: *const ember_server) -> Result<&'a Arc<Server>> {
    non_null(p, "server").map(|s| &s.server)
}

/// Creates a server with default options. `*out_server` receives it.
///
/// Ownership: the caller owns the server and frees it with `ember_server_free`.
#[no_mangle]
pub unsafe extern "C" fn ember_server_new(out_server: *mut *mut ember_server) -> ember_result {
    guard(|| {
        if out_server.is_null() {
            return Err(args::null("out_server"));
        }
        let boxed = Box::new(ember_server { server: Arc::new(Server::new()) });
        args::write(out_server, "out_server", Box::into_raw(boxed))
    })
}

/// Stops the server if it runs (as `ember_server_stop(server, 0)`: what is in flight is
/// closed), runs every pending release callback, and frees it. NULL is fine (no-op).
///
/// Ownership: `server` is consumed and must not be used afterwards. Returns
/// `EMBER_ERR_STATE` (and frees nothing) when called from one of this server's own
/// threads or callbacks (a handler, a log, release or thread-hook callback): stop it
/// there, and free it from another thread.
#[no_mangle]
pub unsafe extern "C" fn ember_server_free(server: *mut ember_server) -> ember_result {
    guard(|| {
        if server.is_null() {
            return Ok(());
        }
        let s = &unsafe { &*server }.server;
        if s.is_inside() {
            return Err(Error::new(
                ErrorKind::State,
                "ember_server_free: called from one of this server's own threads or callbacks; stop it there and free it from another thread",
            ));
        }
        s.stop(Duration::ZERO)?;
        s.wait(None)?;
        // SAFETY: `server` came from Box::into_raw in ember_server_new; the host gives it up here.
        drop(unsafe { Box::from_raw(server) });
        Ok(())
    })
}

/// Adds a listen address ("127.0.0.1:8080", "0.0.0.0:80", "[::1]:0"); may be called several
/// times. Port 0 picks a free port: read it with `ember_server_port` after start.
/// Before start only. `address` is copied.
#[no_mangle]
pub unsafe extern "C" fn ember_server_listen(server: *mut ember_server, address: *const c_char) -> ember_result {
    guard(|| get(server)?.listen(c_str(address, "address")?))
}

/// Like `ember_server_listen`, with `EMBER_LISTEN_*` flags (0 = none):
/// `EMBER_LISTEN_REUSE_PORT` sets SO_REUSEPORT so several processes (or servers) listen on
/// one port and the kernel spreads connections among them (`EMBER_ERR_BIND` at start where
/// the system lacks it). Unknown flags are `EMBER_ERR_INVALID_ARG`. Before start only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_listen_flags(server: *mut ember_server, address: *const c_char, flags: u32) -> ember_result {
    guard(|| {
        let s = get(server)?;
        let address = c_str(address, "address")?;
        if flags & !(EMBER_LISTEN_REUSE_PORT | EMBER_LISTEN_PROXY_PROTOCOL) != 0 {
            return Err(Error::new(ErrorKind::InvalidArg, format!("listen flags {flags:#x} include unknown bits")));
        }
        s.listen_spec(address, flags & EMBER_LISTEN_REUSE_PORT != 0, flags & EMBER_LISTEN_PROXY_PROTOCOL != 0)
    })
}

/// Number of I/O worker threads (0 = one per core, the default; at most 1024). Before
/// start only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_set_workers(server: *mut ember_server, workers: u32) -> ember_result {
    guard(|| get(server)?.set_workers(thread_count("workers", workers)?))
}

/// Thread counts are checked here because a huge one does not fail cleanly later: the
/// runtime sizes tables by it up front, and an allocation that fails aborts the process.
const MAX_THREADS: u32 = 1024;

fn thread_count(what: &str, n: u32) -> Result<usize> {
    if n > MAX_THREADS {
        return Err(Error::new(ErrorKind::InvalidArg, format!("{what}: {n} threads is more than the {MAX_THREADS} allowed")));
    }
    Ok(n as usize)
}

/// `EMBER_DISPATCH_AUTO` (default), `EMBER_DISPATCH_POOL` or `EMBER_DISPATCH_INLINE`. Before
/// start only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_set_dispatch(server: *mut ember_server, mode: i32) -> ember_result {
    guard(|| {
        let dispatch = match mode {
            EMBER_DISPATCH_INLINE => Dispatch::Inline,
            EMBER_DISPATCH_POOL => Dispatch::Pool,
            EMBER_DISPATCH_AUTO => Dispatch::Auto,
            _ => return Err(Error::new(ErrorKind::InvalidArg, format!("dispatch mode {mode} is unknown"))),
        };
        get(server)?.set_dispatch(dispatch)
    })
}

/// Callback threads in pool mode (0 = default: 4 per core, at least 8; at most 1024).
/// Before start only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_set_pool_threads(server: *mut ember_server, threads: u32) -> ember_result {
    guard(|| get(server)?.set_pool_threads(thread_count("pool threads", threads)?))
}

/// Sets one limit (`EMBER_LIMIT_*`). Sizes must be > 0: header bytes 1024 to 64 MiB,
/// headers 1 to 10000, queued requests 1 to 1048576. Timeouts in ms, 0 = off; values
/// above 2^40 ms (about 34 years) count as 2^40. Before start only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_set_limit(server: *mut ember_server, limit: i32, value: u64) -> ember_result {
    guard(|| {
        let s = get(server)?;
        // Deadlines are sums of a clock reading and a timeout; a near-u64::MAX timeout
        // would wrap and close every connection at once.
        let ms = Duration::from_millis(value.min(MAX_TIMEOUT_MS));
        let positive = |name: &str, min: u64| -> Result<u64> {
            if value < min {
                Err(Error::new(ErrorKind::InvalidArg, format!("{name} must be at least {min}, got {value}")))
            } else {
                Ok(value)
            }
        };
        // The parser allocates room for max_headers headers for every request head, so a
        // huge count costs memory per request and, past what can be allocated, aborts.
        let at_most = |name: &str, v: u64, max: u64| -> Result<u64> {
            if v > max {
                Err(Error::new(ErrorKind::InvalidArg, format!("{name} must be at most {max}, got {v}")))
            } else {
                Ok(v)
            }
        };
        let small = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        match limit {
            EMBER_LIMIT_MAX_HEADER_BYTES => {
                let v = small(at_most("max header bytes", positive("max header bytes", 1024)?, 64 << 20)?);
                s.set_limits(|l| Ok(l.max_header_bytes = v))
            }
            EMBER_LIMIT_MAX_HEADERS => {
                let v = small(at_most("max headers", positive("max headers", 1)?, 10_000)?);
                s.set_limits(|l| Ok(l.max_headers = v))
            }
            EMBER_LIMIT_MAX_BODY_BYTES => {
                let v = positive("max body bytes", 1)?.min(isize::MAX as u64);
                s.set_limits(|l| Ok(l.max_body_bytes = v))
            }
            EMBER_LIMIT_HEADER_TIMEOUT_MS => s.set_limits(|l| Ok(l.header_timeout = ms)),
            EMBER_LIMIT_IDLE_TIMEOUT_MS => s.set_limits(|l| Ok(l.idle_timeout = ms)),
            EMBER_LIMIT_MAX_CONNECTIONS => {
                let v = small(positive("max connections", 1)?).min(1 << 24);
                s.set_limits(|l| Ok(l.max_connections = v))
            }
            EMBER_LIMIT_HANDLER_TIMEOUT_MS => s.set_limits(|l| Ok(l.handler_timeout = ms)),
            EMBER_LIMIT_MIN_BODY_RATE => s.set_limits(|l| Ok(l.min_body_rate = value)),
            EMBER_LIMIT_BODY_RATE_GRACE_MS => s.set_limits(|l| Ok(l.body_rate_grace = ms)),
            EMBER_LIMIT_MAX_QUEUED => {
                // The queue's slots are allocated at start, all of them.
                let v = small(at_most("max queued requests", positive("max queued requests", 1)?, 1 << 20)?);
                s.set_limits(|l| Ok(l.max_queued = v))
            }
            EMBER_LIMIT_MAX_CONN_BODY_BYTES => {
                let v = positive("max connection body bytes", 1)?;
                s.set_limits(|l| Ok(l.max_conn_body_bytes = v))
            }
            EMBER_LIMIT_MAX_STREAM_BODY_BYTES => {
                let v = positive("max streamed body bytes", 1)?;
                s.set_limits(|l| Ok(l.max_stream_body_bytes = v))
            }
            EMBER_LIMIT_STREAM_QUEUE_BYTES => {
                let v = small(positive("stream queue bytes", 1)?);
                s.set_limits(|l| Ok(l.stream_queue_bytes = v))
            }
            EMBER_LIMIT_WS_MAX_MESSAGE_BYTES => {
                let v = small(positive("WebSocket max message bytes", 1)?);
                s.set_limits(|l| Ok(l.ws_max_message_bytes = v))
            }
            EMBER_LIMIT_WS_QUEUE_BYTES => {
                let v = small(positive("WebSocket queue bytes", 1)?);
                s.set_limits(|l| Ok(l.ws_queue_bytes = v))
            }
            EMBER_LIMIT_WS_PING_INTERVAL_MS => s.set_limits(|l| Ok(l.ws_ping_interval = ms)),
            EMBER_LIMIT_WS_MAX_CONNECTIONS => {
                let v = small(positive("WebSocket connections per route", 1)?);
                s.set_limits(|l| Ok(l.ws_max_connections = v))
            }
            _ => Err(Error::new(ErrorKind::InvalidArg, format!("limit {limit} is unknown"))),
        }
    })
}

const MAX_TIMEOUT_MS: u64 = 1 << 40;

/// Sends the engine's log lines up to `min_level` (`EMBER_LOG_*`) to `log`; NULL `log`
/// restores the default (warnings and errors to stderr). Before start only.
///
/// Ownership: `user_data` stays the caller's; it must stay valid until
/// `ember_server_free` returns.
#[no_mangle]
pub unsafe extern "C" fn ember_server_set_log(server: *mut ember_server, log: ember_log_fn, user_data: *mut c_void, min_level: i32) -> ember_result {
    guard(|| {
        let level = match min_level {
            ..=1 => Level::Error,
            2 => Level::Warn,
            3 => Level::Info,
            _ => Level::Debug,
        };
        let ud = UserData(user_data);
        let sink = log.map(|f| -> crate::log::LogSink {
            Arc::new(move |level: Level, msg: &str| {
                let ud = ud;
                // SAFETY: the host's callback with its own pointer and a valid message.
                unsafe { f(ud.0, level as i32, msg.as_ptr().cast(), msg.len()) }
            })
        });
        get(server)?.set_logger(Logger::new(sink, level))
    })
}

/// Hooks called on every engine thread that may run host callbacks (I/O workers and
/// pool threads), when it starts and before it ends. Either may be NULL. Before start only.
///
/// Ownership: `user_data` stays the caller's; valid until `ember_server_free` returns.
#[no_mangle]
pub unsafe extern "C" fn ember_server_set_thread_hooks(
    server: *mut ember_server,
    on_start: ember_thread_fn,
    on_stop: ember_thread_fn,
    user_data: *mut c_void,
) -> ember_result {
    guard(|| {
        let ud = UserData(user_data);
        let hook = |f: ember_thread_fn| {
            f.map(|f| -> crate::dispatch::ThreadHook {
                Arc::new(move || {
                    let ud = ud;
                    // SAFETY: the host's callback with its own pointer.
                    unsafe { f(ud.0) }
                })
            })
        };
        get(server)?.set_hooks(Hooks { on_start: hook(on_start), on_stop: hook(on_stop) })
    })
}

/// Registers a handler for `method` ("GET", "POST", ...; NULL or "*" = any method) and
/// `pattern` ("/users/{id}", "/files/{*rest}"). HEAD requests use the GET handler when
/// no HEAD one is registered. Before start only. Strings are copied.
///
/// Ownership: on success the engine holds `user_data` and calls `release` (NULL is fine)
/// exactly once when it no longer needs it: after stop, or at free. On failure nothing
/// is taken and `release` is not called.
#[no_mangle]
pub unsafe extern "C" fn ember_server_route(
    server: *mut ember_server,
    method: *const c_char,
    pattern: *const c_char,
    handler: ember_handler_fn,
    user_data: *mut c_void,
    release: ember_release_fn,
) -> ember_result {
    unsafe { ember_server_route_flags(server, method, pattern, 0, handler, user_data, release) }
}

/// Like `ember_server_route`, with `EMBER_ROUTE_*` flags (0 = none).
/// `EMBER_ROUTE_STREAM_BODY`: the handler is called once the head is in; `info->body` is
/// empty, `info->flags` has `EMBER_REQUEST_BODY_STREAMED`, and the body is read with
/// `ember_request_read` (the body limit and minimum rate still apply; the handler timeout
/// starts once the body is in). `EMBER_ROUTE_POOL`: under auto dispatch the handler always
/// runs on a pool thread, never on its connection's I/O thread (for handlers that block on
/// their own streamed answer, like a WSGI or System.Web bridge). Unknown flags are
/// `EMBER_ERR_INVALID_ARG`.
#[no_mangle]
pub unsafe extern "C" fn ember_server_route_flags(
    server: *mut ember_server,
    method: *const c_char,
    pattern: *const c_char,
    flags: u32,
    handler: ember_handler_fn,
    user_data: *mut c_void,
    release: ember_release_fn,
) -> ember_result {
    guard(|| {
        if flags & !(EMBER_ROUTE_STREAM_BODY | EMBER_ROUTE_POOL) != 0 {
            return Err(Error::new(ErrorKind::InvalidArg, format!("route flags {flags:#x} include unknown bits")));
        }
        let s = get(server)?;
        let method = if method.is_null() { "*" } else { c_str(method, "method")? };
        let method = match method {
            "*" => None,
            m => Some(http::Method::from_bytes(m.as_bytes()).map_err(|_| {
                Error::new(ErrorKind::InvalidArg, format!("method {m:?} is not an HTTP method token"))
            })?),
        };
        let pattern = c_str(pattern, "pattern")?;
        let f = handler.ok_or_else(|| args::null("handler"))?;
        let release = Arc::new(Release::new(release, UserData(user_data)));
        let owned = release.clone();
        let host: Handler = Arc::new(move |req: &Request| {
            let ud = owned.user_data;
            // SAFETY: the host's callback, its pointer, and an info struct that outlives the call.
            unsafe { f(ud.0, req.id(), req.data().info()) }
        });
        let endpoint = crate::router::Endpoint::Http {
            handler: host,
            stream_body: flags & EMBER_ROUTE_STREAM_BODY != 0,
            pool: flags & EMBER_ROUTE_POOL != 0,
        };
        s.route_to(method, pattern, endpoint).inspect_err(|_| release.disarm())
    })
}

/// Binds every listen address and starts serving; returns once listening. A bind failure
/// ("address in use") returns `EMBER_ERR_BIND` with the address in the message.
#[no_mangle]
pub unsafe extern "C" fn ember_server_start(server: *mut ember_server) -> ember_result {
    guard(|| get(server)?.start())
}

/// The bound port of the `index`-th `ember_server_listen` address (0-based), after start.
#[no_mangle]
pub unsafe extern "C" fn ember_server_port(server: *const ember_server, index: usize, out_port: *mut u16) -> ember_result {
    guard(|| {
        let s = get(server)?;
        if out_port.is_null() {
            return Err(args::null("out_port"));
        }
        args::write(out_port, "out_port", s.port(index)?)
    })
}

/// Trusts the proxy (or proxies) at `cidr` ("10.0.0.0/8", "127.0.0.1", "::1/128"; copied):
/// their PROXY headers and `Forwarded` / `X-Forwarded-For` / `X-Forwarded-Proto` headers
/// decide `info->remote_addr` and `info->scheme` (the nearest hop that is not a trusted
/// proxy is the client). From any other peer those headers are ignored. May be called
/// several times. Before start only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_add_trusted_proxy(server: *mut ember_server, cidr: *const c_char) -> ember_result {
    guard(|| get(server)?.add_trusted_proxy(c_str(cidr, "cidr")?))
}

/// A path the engine answers itself for GET and HEAD (copied): 200 `{"status": "ok"}`, or
/// 503 `{"status": "draining"}` after `ember_server_drain`. For load balancers' health
/// checks. Before start only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_set_health_path(server: *mut ember_server, path: *const c_char) -> ember_result {
    guard(|| get(server)?.set_health_path(c_str(path, "path")?))
}

/// Starts draining, ahead of a stop (rolling restarts behind a load balancer): the health
/// path answers 503, and every HTTP/1.1 answer carries `Connection: close`, so the balancer
/// takes this process out and keep-alive clients reconnect elsewhere. The server goes on
/// accepting and serving until `ember_server_stop`. Idempotent; while running only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_drain(server: *mut ember_server) -> ember_result {
    guard(|| get(server)?.drain())
}

/// Drains (as `ember_server_drain`) and stops accepting: the listening sockets close, so new
/// connections are refused (connections the system had already completed are accepted
/// first and served). Open connections are still served, each answer closing its
/// connection, until `ember_server_stop`. For balancers without active health checks
/// (nginx open source): a refused connection is retried on another server even for a POST,
/// as nothing of it was sent. Idempotent; while running only. It returns once the listeners
/// are closed (at most 2 s), so a connection tried afterwards is refused; called from one of
/// this server's own callbacks it returns at once and they close moments later.
#[no_mangle]
pub unsafe extern "C" fn ember_server_stop_accepting(server: *mut ember_server) -> ember_result {
    guard(|| get(server)?.stop_accepting())
}

/// Graceful stop: stop accepting, let in-flight requests finish, close idle keep-alive
/// connections, force-close what is left after `timeout_ms`. Idempotent. When it returns,
/// no handler runs any more and every route's release callback has been called.
///
/// From inside one of this server's handlers it only starts the shutdown and returns
/// `EMBER_OK` at once; another thread can block in `ember_server_wait`.
#[no_mangle]
pub unsafe extern "C" fn ember_server_stop(server: *mut ember_server, timeout_ms: u32) -> ember_result {
    guard(|| get(server)?.stop(Duration::from_millis(timeout_ms as u64)))
}

/// Blocks until the server has stopped (`EMBER_OK`) or `timeout_ms` passes
/// (`EMBER_ERR_TIMED_OUT`). `EMBER_WAIT_FOREVER` waits without a limit. Not from inside
/// one of its own handlers (`EMBER_ERR_STATE`).
#[no_mangle]
pub unsafe extern "C" fn ember_server_wait(server: *mut ember_server, timeout_ms: u32) -> ember_result {
    guard(|| {
        let timeout = (timeout_ms != EMBER_WAIT_FOREVER).then(|| Duration::from_millis(timeout_ms as u64));
        get(server)?.wait(timeout)
    })
}

/// Copies the server's counters into `*out_stats`. Any time, any thread.
///
/// `stats_size` is `sizeof(ember_stats)` as the caller knows it: at most that many bytes
/// are written, so a program built against an older header stays safe when fields are
/// appended. `out_stats->size` tells how many the library filled.
#[no_mangle]
pub unsafe extern "C" fn ember_server_stats(server: *const ember_server, out_stats: *mut Stats, stats_size: usize) -> ember_result {
    guard(|| {
        let s = get(server)?;
        args::write_sized(out_stats, stats_size, "out_stats", s.stats())
    })
}
