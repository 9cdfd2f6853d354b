//! Numbers that are part of the ABI. Never renumber; retired codes stay as comments.

use super::types::ember_result;

/// The ABI version; bumped when functions are added (nothing is ever removed).
/// 2: `ember_request_info` and `ember_stats` start with their size, `ember_request_get_info`
/// and `ember_server_stats` take the caller's struct size, `ember_server_listen_flags`,
/// limits 8-11. 3: streamed answers and bodies, request events, WebSocket, limits 12-17,
/// auto dispatch, health path and drain, trusted proxies and the PROXY protocol,
/// `ember_request_info.scheme` and `.peer_addr`. 4: static files, compression, the output
/// cache, CORS, filters, TLS, the access log, metrics, `ember_server_stop_accepting`.
/// 5: prepared answers (`ember_answer_new`, `ember_answer_free`,
/// `ember_request_respond_answer`) and `ember_request_respond_small`. 6: `EMBER_COMPRESS_ZSTD`
/// (a library before it refuses the bit), the request info's text views NUL-terminated and
/// back to back.
pub const EMBER_ABI_VERSION: u32 = 6;

/// Success.
pub const EMBER_OK: ember_result = 0;
/// A required pointer argument was NULL.
pub const EMBER_ERR_NULL: ember_result = -1;
/// An argument's value is wrong: not UTF-8, a bad header line, a bad status, an unknown option.
pub const EMBER_ERR_INVALID_ARG: ember_result = -2;
/// Not allowed in the server's current state (configure after start, start twice, use after stop).
pub const EMBER_ERR_STATE: ember_result = -3;
/// A listen address could not be bound; the message names it and the reason.
pub const EMBER_ERR_BIND: ember_result = -4;
/// A route pattern is malformed or conflicts with one already registered.
pub const EMBER_ERR_ROUTE: ember_result = -5;
/// The request was already answered.
pub const EMBER_ERR_ALREADY_ANSWERED: ember_result = -6;
/// The handler timeout answered the request first (503); or `ember_server_wait` timed out.
pub const EMBER_ERR_TIMED_OUT: ember_result = -7;
/// The client disconnected, or the server stopped, before the answer.
pub const EMBER_ERR_CLIENT_GONE: ember_result = -8;
/// Not a request handle from this library, or one so old its slot was reused.
pub const EMBER_ERR_INVALID_HANDLE: ember_result = -9;
/// The header or parameter asked for is absent.
pub const EMBER_ERR_NOT_FOUND: ember_result = -10;
/// The caller's buffer is too small.
pub const EMBER_ERR_BUFFER_TOO_SMALL: ember_result = -11;
/// An internal panic was caught at the boundary (a bug in Ember; the server keeps running).
pub const EMBER_ERR_PANIC: ember_result = -12;
/// Threads or the runtime could not be created, or another I/O failure.
pub const EMBER_ERR_RUNTIME: ember_result = -13;
/// Not now: a write found its queue full, or a read found nothing yet. Nothing was taken;
/// wait for `EMBER_EVENT_WRITABLE` / `EMBER_EVENT_READABLE` (or a blocking wait) and retry.
pub const EMBER_ERR_WOULD_BLOCK: ember_result = -14;
/// A streamed request body passed `EMBER_LIMIT_MAX_BODY_BYTES`; the engine answered 413.
pub const EMBER_ERR_TOO_LARGE: ember_result = -15;
/// This library was built without the cargo feature the function needs (a minimal build
/// has no WebSocket, static files, TLS …); the message names the feature. The function
/// exists in every build so that one header serves them all.
pub const EMBER_ERR_UNSUPPORTED: ember_result = -16;

/// Handlers run on the I/O worker thread: fastest; a handler must not block.
pub const EMBER_DISPATCH_INLINE: i32 = 0;
/// Handlers run on a bounded pool of long-lived threads; blocking is safe.
pub const EMBER_DISPATCH_POOL: i32 = 1;
/// Default: handlers run on the I/O thread while one more I/O thread stays free, else on
/// the pool: blocking is safe (a blocked handler holds only its own I/O thread), and fast
/// handlers pay no thread hand-off.
pub const EMBER_DISPATCH_AUTO: i32 = 2;

/// Request head size limit in bytes (default 16384) → 431.
pub const EMBER_LIMIT_MAX_HEADER_BYTES: i32 = 1;
/// Request header count limit (default 100) → 431.
pub const EMBER_LIMIT_MAX_HEADERS: i32 = 2;
/// Request body limit in bytes (default 16 MiB) → 413, refused before reading when declared.
pub const EMBER_LIMIT_MAX_BODY_BYTES: i32 = 3;
/// Time to receive a whole request head, in ms (default 10000) → 408 and close. 0 = off.
pub const EMBER_LIMIT_HEADER_TIMEOUT_MS: i32 = 4;
/// Keep-alive idle time before the engine closes a connection, in ms (default 30000). 0 = off.
pub const EMBER_LIMIT_IDLE_TIMEOUT_MS: i32 = 5;
/// Open connections at most (default 10000); further clients wait in the listen backlog.
pub const EMBER_LIMIT_MAX_CONNECTIONS: i32 = 6;
/// Time for the host to answer, in ms (default 30000) → 503. 0 = off.
pub const EMBER_LIMIT_HANDLER_TIMEOUT_MS: i32 = 7;
/// Minimum average request body rate in bytes/s once the grace period has passed
/// (default 240, as Kestrel) → 408 and close. 0 = off.
pub const EMBER_LIMIT_MIN_BODY_RATE: i32 = 8;
/// Grace period before the body rate is checked, in ms (default 5000).
pub const EMBER_LIMIT_BODY_RATE_GRACE_MS: i32 = 9;
/// Requests waiting for a pool thread at most (default 4096) → 503 with Retry-After.
pub const EMBER_LIMIT_MAX_QUEUED: i32 = 10;
/// Request body bytes one connection may hold buffered across its HTTP/2 streams
/// (default 64 MiB, never less than the body limit) → 503 and close.
pub const EMBER_LIMIT_MAX_CONN_BODY_BYTES: i32 = 11;

/// Bytes a streamed answer may have queued before writes are refused
/// (`EMBER_ERR_WOULD_BLOCK`; default 262144).
pub const EMBER_LIMIT_STREAM_QUEUE_BYTES: i32 = 12;
/// The largest WebSocket message (and frame) received (default 1 MiB) → close 1009.
pub const EMBER_LIMIT_WS_MAX_MESSAGE_BYTES: i32 = 13;
/// Bytes a WebSocket may have queued to send before sends are refused (default 1 MiB); also
/// how much received data may wait for the host before the engine stops reading.
pub const EMBER_LIMIT_WS_QUEUE_BYTES: i32 = 14;
/// An idle WebSocket is pinged this often, in ms, and cut when a ping goes unanswered
/// until the next (default 30000). 0 = no pings.
pub const EMBER_LIMIT_WS_PING_INTERVAL_MS: i32 = 15;
/// Open WebSocket connections per route at most (default 100000) → 503.
pub const EMBER_LIMIT_WS_MAX_CONNECTIONS: i32 = 16;

/// The body limit of routes registered with `EMBER_ROUTE_STREAM_BODY` (default 1 GiB) →
/// 413. They hold a small window, not the body, so it may be far above
/// `EMBER_LIMIT_MAX_BODY_BYTES`.
pub const EMBER_LIMIT_MAX_STREAM_BODY_BYTES: i32 = 17;

/// `ember_server_listen_flags`: SO_REUSEPORT, several processes share the port.
pub const EMBER_LISTEN_REUSE_PORT: u32 = 1;
/// `ember_server_listen_flags`: every connection starts with a PROXY protocol header (v1 or
/// v2, as HAProxy or nginx `proxy_protocol on` send it) naming the client; a connection
/// without one is closed. With trusted proxies configured, only they may connect here.
pub const EMBER_LISTEN_PROXY_PROTOCOL: u32 = 2;

/// `ember_server_route_flags`: the handler reads the body in pieces (`ember_request_read`).
pub const EMBER_ROUTE_STREAM_BODY: u32 = 1;
/// `ember_server_route_flags`: under auto dispatch, always run the handler on a pool thread
/// (it blocks on its own streamed answer, which its connection's I/O thread must drain).
pub const EMBER_ROUTE_POOL: u32 = 2;

/// `ember_request_info.flags`: the body is read with `ember_request_read`, not in `body`.
pub const EMBER_REQUEST_BODY_STREAMED: u32 = 1;
/// `ember_request_info.flags`: a WebSocket upgrade request (seen by `on_open`).
pub const EMBER_REQUEST_WEBSOCKET: u32 = 2;
/// `ember_request_info.flags`: the request came through a TLS listener (HTTPS, WSS).
pub const EMBER_REQUEST_TLS: u32 = 4;

/// Events (`ember_event_fn`): a refused write may now go through.
pub const EMBER_EVENT_WRITABLE: i32 = 1;
/// A read that found nothing may now find data, the end, or an error.
pub const EMBER_EVENT_READABLE: i32 = 2;
/// Final: the client left, the handler timeout answered, or the server stopped.
pub const EMBER_EVENT_ABORTED: i32 = 3;
/// Final: the whole answer was handed to the connection.
pub const EMBER_EVENT_COMPLETED: i32 = 4;

/// A WebSocket text message (UTF-8, checked by the engine on receipt).
pub const EMBER_WS_TEXT: i32 = 1;
/// A WebSocket binary message.
pub const EMBER_WS_BINARY: i32 = 2;

pub const EMBER_LOG_ERROR: i32 = 1;
pub const EMBER_LOG_WARN: i32 = 2;
pub const EMBER_LOG_INFO: i32 = 3;
pub const EMBER_LOG_DEBUG: i32 = 4;
/// The level of access log lines sent to the log callback (`ember_server_set_access_log`
/// with a NULL path). Not a threshold: they arrive whatever level the callback has.
pub const EMBER_LOG_ACCESS: i32 = 5;

/// `ember_server_set_access_log`: no access log (the default).
pub const EMBER_ACCESS_LOG_OFF: i32 = 0;
/// `ember_server_set_access_log`: Apache's Combined Log Format.
pub const EMBER_ACCESS_LOG_COMBINED: i32 = 1;
/// `ember_server_set_access_log`: one JSON object per line.
pub const EMBER_ACCESS_LOG_JSON: i32 = 2;

/// `ember_server_wait` timeout meaning "no timeout".
pub const EMBER_WAIT_FOREVER: u32 = u32::MAX;
