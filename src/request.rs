//! The request as the host sees it: one owned block of text plus a C-layout info
//! struct of views into it, built once so a host reads everything without further calls.

use bytes::Bytes;
use http::HeaderMap;
use std::os::raw::c_char;

/// A borrowed view: pointer + length, not NUL-terminated. `ptr` may be NULL when `len` is 0.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct StrView {
    pub ptr: *const c_char,
    pub len: usize,
}

impl StrView {
    pub const EMPTY: StrView = StrView { ptr: std::ptr::null(), len: 0 };

    pub fn of(bytes: &[u8]) -> StrView {
        StrView { ptr: bytes.as_ptr().cast(), len: bytes.len() }
    }
}

/// One header or route parameter: name and value views.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HeaderView {
    /// Lower-case for headers.
    pub name: StrView,
    pub value: StrView,
}

/// Everything a handler usually needs, in one struct. All views are owned by the engine.
///
/// They stay valid until an answer call on this request succeeds or reports that the
/// request already ended (`EMBER_ERR_ALREADY_ANSWERED`, `EMBER_ERR_TIMED_OUT`,
/// `EMBER_ERR_CLIENT_GONE`), or until the server stops, whichever comes first. A call
/// refused for its own arguments (`EMBER_ERR_INVALID_ARG`, `EMBER_ERR_NULL`) changes
/// nothing: the request still waits and the views stay valid, so the host can answer
/// again. They also stay valid when the handler timeout or a departing client ended
/// the request meanwhile: always answer, since that is also what releases an expired
/// request's memory before stop.
///
/// Fields are only ever appended: `size` tells which exist in the library that filled
/// the struct.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo {
    /// `sizeof(ember_request_info)` of the library that filled it.
    pub size: usize,
    /// The request's handle (same as the handler's `req` argument).
    pub id: u64,
    /// e.g. "GET".
    pub method: StrView,
    /// As sent (percent-encoded), without the query.
    pub path: StrView,
    /// Raw, without the '?'; empty if none.
    pub query: StrView,
    /// The whole buffered body (any bytes, may contain NUL).
    pub body: StrView,
    /// The peer, e.g. "127.0.0.1:53412" or "[::1]:53412".
    pub remote_addr: StrView,
    /// The matched route pattern, e.g. "/users/{id}".
    pub route: StrView,
    /// `header_count` headers in arrival order; names lower-case, values raw bytes.
    pub headers: *const HeaderView,
    pub header_count: usize,
    /// `param_count` route parameters; values percent-decoded.
    pub params: *const HeaderView,
    pub param_count: usize,
    /// 10, 11 or 20.
    pub http_version: u32,
    /// The body's declared length (Content-Length); -1 when the client did not say
    /// (chunked, HTTP/2 without it) or sent no body.
    pub content_length: i64,
    /// `EMBER_REQUEST_BODY_STREAMED`: the body is not in `body`; read it with
    /// `ember_request_read`. `EMBER_REQUEST_WEBSOCKET`: a WebSocket upgrade request.
    pub flags: u32,
    /// "http" or "https": how the client reached the server (a trusted proxy's
    /// `X-Forwarded-Proto` / `Forwarded: proto=` counts).
    pub scheme: StrView,
    /// The TCP peer. `remote_addr` differs from it only behind a trusted proxy (PROXY
    /// header, `Forwarded`, `X-Forwarded-For`); then `remote_addr` may lack a port.
    pub peer_addr: StrView,
}

/// The host's answer, validated and ready for hyper.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// A Content-Length the host stated itself. Only an answer to HEAD uses it (the size
    /// of what GET would send); otherwise the engine counts the body.
    pub declared_len: Option<u64>,
    /// The request's exchange, if it has one: a streamed answer's queue, the host's
    /// event callback.
    pub(crate) ex: Option<std::sync::Arc<crate::exchange::Exchange>>,
    /// The body comes from the exchange's stream, not from `body`.
    pub(crate) streamed: bool,
    /// The body is (part of) a file, read as it is sent (static files).
    /// Boxed: inline it made every answer (moved several times per request) a few
    /// hundred bytes larger.
    pub(crate) file: Option<Box<crate::file_body::FileBody>>,
    /// The headers may carry the output cache's marker (`cache::MARKER`), which must not
    /// reach a client. False only where the engine parsed the host's header block and
    /// found none, so that the usual answer skips a header lookup.
    pub(crate) marked: bool,
}

impl Answer {
    pub fn new(status: u16, headers: HeaderMap, body: Bytes) -> Answer {
        Answer { status, headers, body, declared_len: None, ex: None, streamed: false, file: None, marked: true }
    }
}

/// Owned request contents. The views in `info` point into `text`, `body` and the two
/// view vectors, all heap blocks that never move or change after construction.
pub struct RequestData {
    _text: Vec<u8>,
    body: Bytes,
    headers: Vec<HeaderView>,
    params: Vec<HeaderView>,
    info: RequestInfo,
    /// Gives the body's bytes back to the connection's budget when the data is freed.
    _budget: Option<crate::connstate::BodyBudget>,
    _held: Option<crate::stats::Held>,
}

// SAFETY: the raw pointers only point into this struct's own immutable heap blocks.
unsafe impl Send for RequestData {}
unsafe impl Sync for RequestData {}

/// The parts a request is built from.
pub struct Parts<'a> {
    pub id: u64,
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub remote_addr: &'a str,
    pub route: &'a str,
    pub headers: &'a HeaderMap,
    pub params: &'a [(String, String)],
    pub body: Bytes,
    pub http_version: u32,
    pub content_length: Option<u64>,
    pub flags: u32,
    pub scheme: &'a str,
    pub peer_addr: &'a str,
}

/// The text block while it is built: pieces are appended and their views recorded as
/// offsets, since the block may still grow (and move); `view` turns them into pointers
/// once it is complete. One pass over the headers, where sizing the block exactly first
/// took two.
struct Text(Vec<u8>);

impl Text {
    fn push(&mut self, s: &[u8]) -> StrView {
        let start = self.0.len();
        self.0.extend_from_slice(s);
        StrView { ptr: std::ptr::without_provenance(start), len: s.len() }
    }

    /// A view recorded by `push`, as a pointer into the finished block.
    fn view(&self, v: StrView) -> StrView {
        // SAFETY: `v.ptr` is an offset `push` returned, with `v.len` bytes after it
        // inside the block.
        StrView { ptr: unsafe { self.0.as_ptr().add(v.ptr as usize) }.cast(), len: v.len }
    }
}

/// Room guessed per header (name and value) before the block has to grow.
const HEADER_ROOM: usize = 64;

impl RequestData {
    pub fn new(p: Parts<'_>) -> RequestData {
        let size = p.method.len()
            + p.path.len()
            + p.query.len()
            + p.remote_addr.len()
            + p.route.len()
            + p.headers.len() * HEADER_ROOM
            + p.params.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
            + p.scheme.len()
            + p.peer_addr.len();
        let mut t = Text(Vec::with_capacity(size));
        let method = t.push(p.method.as_bytes());
        let path = t.push(p.path.as_bytes());
        let query = t.push(p.query.as_bytes());
        let remote = t.push(p.remote_addr.as_bytes());
        let route = t.push(p.route.as_bytes());
        let mut headers: Vec<HeaderView> = Vec::with_capacity(p.headers.len());
        for (k, v) in p.headers {
            headers.push(HeaderView { name: t.push(k.as_str().as_bytes()), value: t.push(v.as_bytes()) });
        }
        let mut params: Vec<HeaderView> =
            p.params.iter().map(|(k, v)| HeaderView { name: t.push(k.as_bytes()), value: t.push(v.as_bytes()) }).collect();
        let scheme = t.push(p.scheme.as_bytes());
        let peer_addr = t.push(p.peer_addr.as_bytes());
        // From here on the block never changes, so the views stay valid for its life.
        for h in headers.iter_mut().chain(params.iter_mut()) {
            *h = HeaderView { name: t.view(h.name), value: t.view(h.value) };
        }
        let (method, path, query, remote, route, scheme, peer_addr) =
            (t.view(method), t.view(path), t.view(query), t.view(remote), t.view(route), t.view(scheme), t.view(peer_addr));
        let text = t.0;
        let info = RequestInfo {
            size: std::mem::size_of::<RequestInfo>(),
            id: p.id,
            method,
            path,
            query,
            body: StrView::of(&p.body),
            remote_addr: remote,
            route,
            headers: if headers.is_empty() { std::ptr::null() } else { headers.as_ptr() },
            header_count: headers.len(),
            params: if params.is_empty() { std::ptr::null() } else { params.as_ptr() },
            param_count: params.len(),
            http_version: p.http_version,
            content_length: p.content_length.and_then(|n| i64::try_from(n).ok()).unwrap_or(-1),
            flags: p.flags,
            scheme,
            peer_addr,
        };
        RequestData { _text: text, body: p.body, headers, params, info, _budget: None, _held: None }
    }

    pub(crate) fn with_accounting(mut self, budget: Option<crate::connstate::BodyBudget>, held: crate::stats::Held) -> RequestData {
        self._budget = budget;
        self._held = Some(held);
        self
    }

    pub fn info(&self) -> &RequestInfo {
        &self.info
    }

    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Private on purpose: a `StrView`'s fields are public, so only views this struct
    /// made itself may be read through it.
    fn slice(&self, v: StrView) -> &[u8] {
        if v.len == 0 {
            return &[];
        }
        // SAFETY: callers pass only views taken from this struct's own `info`, `headers`
        // or `params`, which point into memory this struct owns.
        unsafe { std::slice::from_raw_parts(v.ptr.cast(), v.len) }
    }

    fn str(&self, v: StrView) -> &str {
        std::str::from_utf8(self.slice(v)).unwrap_or("")
    }

    pub fn method(&self) -> &str {
        self.str(self.info.method)
    }

    pub fn path(&self) -> &str {
        self.str(self.info.path)
    }

    pub fn query(&self) -> &str {
        self.str(self.info.query)
    }

    pub fn remote_addr(&self) -> &str {
        self.str(self.info.remote_addr)
    }

    /// First header with this name (ASCII case-insensitive).
    pub fn header_view(&self, name: &str) -> Option<StrView> {
        self.headers.iter().find(|h| self.slice(h.name).eq_ignore_ascii_case(name.as_bytes())).map(|h| h.value)
    }

    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.header_view(name).map(|v| self.slice(v))
    }

    pub fn param_view(&self, name: &str) -> Option<StrView> {
        self.params.iter().find(|h| self.slice(h.name) == name.as_bytes()).map(|h| h.value)
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.param_view(name).map(|v| self.str(v))
    }

    /// The headers in arrival order: lower-case name, raw value.
    pub fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.headers.iter().map(|h| (self.slice(h.name), self.slice(h.value)))
    }

    /// The route parameters, percent-decoded.
    pub fn params(&self) -> impl Iterator<Item = (&str, &str)> {
        self.params.iter().map(|h| (self.str(h.name), self.str(h.value)))
    }
}
