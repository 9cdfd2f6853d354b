//! The request as the host sees it: one owned block of text plus a C-layout info
//! struct of views into it, built once so a host reads everything without further calls.

use bytes::Bytes;
use http::HeaderMap;
use std::mem::MaybeUninit;
use std::os::raw::c_char;
use std::sync::Arc;

/// A borrowed view: pointer + length, not NUL-terminated in general (the request info
/// says which are). `ptr` may be NULL when `len` is 0.
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
/// Every view but `body` is followed by a NUL byte (not counted in its `len`), and
/// those views lie back to back in one block, in this order: `method`, `path`, `query`,
/// `remote_addr`, `route`, each header's name and value, each parameter's name and
/// value, `scheme`, `peer_addr`. So the text from `method.ptr` to the NUL after
/// `peer_addr` can be copied once and split at its NULs (header names and values never
/// contain one; a percent-decoded parameter value may), as the Python binding does.
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

/// Owned request contents. The views in `info` point into `block` and `body`, heap
/// blocks that never move or change after construction.
pub struct RequestData {
    block: Block,
    body: Bytes,
    header_count: usize,
    param_count: usize,
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

/// One heap block for the request's views and text: the header and parameter views
/// first (`HeaderView`s), the text after them. One allocation per request where a text
/// block and a view vector took two (three with route parameters), and none when the
/// thread's spare block has room.
///
/// Sized exactly before anything is written (a first pass over the headers adds up their
/// lengths), so it never grows while it is filled and every view is a pointer at once:
/// growing and then turning recorded offsets into pointers cost more than that pass.
struct Block {
    /// Words, so that the views at the start are aligned.
    words: Vec<MaybeUninit<u64>>,
}

const WORD: usize = std::mem::size_of::<u64>();

/// Writes text into a block sized for all of it.
struct Filler {
    base: *mut u8,
    at: usize,
    end: usize,
}

impl Filler {
    /// Appends `s` and a NUL after it (not counted in the view): the text views are
    /// then C strings too, and a binding can split the whole text at once (see
    /// `RequestInfo`).
    #[inline]
    fn push(&mut self, s: &[u8]) -> StrView {
        assert!(s.len() < self.end - self.at, "the block was sized for all the text");
        // SAFETY: `at..=at + len` lies inside the block (checked above), which nothing
        // else refers to while it is filled.
        unsafe {
            let dst = self.base.add(self.at);
            std::ptr::copy_nonoverlapping(s.as_ptr(), dst, s.len());
            dst.add(s.len()).write(0);
            self.at += s.len() + 1;
            StrView { ptr: dst.cast(), len: s.len() }
        }
    }
}

impl Block {
    fn views(&self, from: usize, count: usize) -> &[HeaderView] {
        if count == 0 {
            return &[];
        }
        // SAFETY: views `from..from + count` were all written by `fill`.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<HeaderView>().add(from), count) }
    }
}

thread_local! {
    /// The data block of this thread's last request answered during its inline call, kept
    /// for the next one: an allocation and a free less per request, and its text block
    /// has room already.
    static SPARE: std::cell::Cell<Option<Arc<RequestData>>> = const { std::cell::Cell::new(None) };
}

const NO_INFO: RequestInfo = RequestInfo {
    size: std::mem::size_of::<RequestInfo>(),
    id: 0,
    method: StrView::EMPTY,
    path: StrView::EMPTY,
    query: StrView::EMPTY,
    body: StrView::EMPTY,
    remote_addr: StrView::EMPTY,
    route: StrView::EMPTY,
    headers: std::ptr::null(),
    header_count: 0,
    params: std::ptr::null(),
    param_count: 0,
    http_version: 0,
    content_length: -1,
    flags: 0,
    scheme: StrView::EMPTY,
    peer_addr: StrView::EMPTY,
};

impl RequestData {
    pub fn new(p: Parts<'_>) -> RequestData {
        let mut data = RequestData {
            block: Block { words: Vec::new() },
            body: Bytes::new(),
            header_count: 0,
            param_count: 0,
            info: NO_INFO,
            _budget: None,
            _held: None,
        };
        data.fill(p);
        data
    }

    /// Like `Arc::new(RequestData::new(p))`, in this thread's spare block if it has one.
    pub(crate) fn shared(p: Parts<'_>) -> Arc<RequestData> {
        match SPARE.with(|s| s.take()) {
            Some(mut spare) => {
                Arc::get_mut(&mut spare).expect("a spare is held only by the thread").fill(p);
                spare
            }
            None => Arc::new(Self::new(p)),
        }
    }

    /// The request was answered and the host is done with its views: its block becomes
    /// this thread's spare, unless something still holds it (the registry, a pool job).
    pub(crate) fn recycle(mut data: Arc<RequestData>) {
        let Some(d) = Arc::get_mut(&mut data) else { return };
        // The accounting ends with the request, not with the block.
        d._held = None;
        d._budget = None;
        d.body = Bytes::new();
        SPARE.with(|s| s.set(Some(data)));
    }

    /// Writes the request into this data's block (reused, grown if it is too small).
    fn fill(&mut self, p: Parts<'_>) {
        let (header_count, param_count) = (p.headers.len(), p.params.len());
        let text = p.method.len()
            + p.path.len()
            + p.query.len()
            + p.remote_addr.len()
            + p.route.len()
            + p.headers.iter().map(|(k, v)| k.as_str().len() + v.len()).sum::<usize>()
            + p.params.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
            + p.scheme.len()
            + p.peer_addr.len()
            + 7
            + 2 * (header_count + param_count); // the NULs
        let views = (header_count + param_count) * std::mem::size_of::<HeaderView>();
        let words = &mut self.block.words;
        words.clear();
        words.reserve((views + text).div_ceil(WORD));
        // SAFETY: reserved above; MaybeUninit needs no initialisation.
        unsafe { words.set_len((views + text).div_ceil(WORD)) };
        let base = words.as_mut_ptr().cast::<u8>();
        let view_at = base.cast::<HeaderView>();
        let mut t = Filler { base, at: views, end: views + text };
        let (method, path, query, remote_addr, route) =
            (t.push(p.method.as_bytes()), t.push(p.path.as_bytes()), t.push(p.query.as_bytes()), t.push(p.remote_addr.as_bytes()), t.push(p.route.as_bytes()));
        let mut i = 0;
        for (k, v) in p.headers.iter().take(header_count) {
            let view = HeaderView { name: t.push(k.as_str().as_bytes()), value: t.push(v.as_bytes()) };
            // SAFETY: the view area holds `header_count + param_count` views; words are
            // 8-aligned, as a HeaderView needs.
            unsafe { view_at.add(i).write(view) };
            i += 1;
        }
        assert_eq!(i, header_count, "a header map yields as many headers as it counts");
        for (k, v) in p.params {
            let view = HeaderView { name: t.push(k.as_bytes()), value: t.push(v.as_bytes()) };
            // SAFETY: as above.
            unsafe { view_at.add(i).write(view) };
            i += 1;
        }
        let (scheme, peer_addr) = (t.push(p.scheme.as_bytes()), t.push(p.peer_addr.as_bytes()));
        self.header_count = header_count;
        self.param_count = param_count;
        self.info = RequestInfo {
            size: std::mem::size_of::<RequestInfo>(),
            id: p.id,
            method,
            path,
            query,
            body: StrView::of(&p.body),
            remote_addr,
            route,
            headers: if header_count == 0 { std::ptr::null() } else { view_at },
            header_count,
            params: if param_count == 0 { std::ptr::null() } else { view_at.wrapping_add(header_count) },
            param_count,
            http_version: p.http_version,
            content_length: p.content_length.and_then(|n| i64::try_from(n).ok()).unwrap_or(-1),
            flags: p.flags,
            scheme,
            peer_addr,
        };
        self.body = p.body;
    }

    /// Fresh from `shared`, so held by the caller alone.
    pub(crate) fn account(mut data: Arc<RequestData>, budget: Option<crate::connstate::BodyBudget>, held: crate::stats::Held) -> Arc<RequestData> {
        if let Some(d) = Arc::get_mut(&mut data) {
            d._budget = budget;
            d._held = Some(held);
        }
        data
    }

    /// The handle, once the registry has given one (`registry::begin_here`).
    pub(crate) fn set_id(&mut self, id: u64) {
        self.info.id = id;
    }

    fn header_views(&self) -> &[HeaderView] {
        self.block.views(0, self.header_count)
    }

    fn param_views(&self) -> &[HeaderView] {
        self.block.views(self.header_count, self.param_count)
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
        self.header_views().iter().find(|h| self.slice(h.name).eq_ignore_ascii_case(name.as_bytes())).map(|h| h.value)
    }

    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.header_view(name).map(|v| self.slice(v))
    }

    pub fn param_view(&self, name: &str) -> Option<StrView> {
        self.param_views().iter().find(|h| self.slice(h.name) == name.as_bytes()).map(|h| h.value)
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.param_view(name).map(|v| self.str(v))
    }

    /// The headers in arrival order: lower-case name, raw value.
    pub fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.header_views().iter().map(|h| (self.slice(h.name), self.slice(h.value)))
    }

    /// The route parameters, percent-decoded.
    pub fn params(&self) -> impl Iterator<Item = (&str, &str)> {
        self.param_views().iter().map(|h| (self.str(h.name), self.str(h.value)))
    }
}

// The packing tests apart, so that request.rs holds only what runs.
#[cfg(test)]
mod tests;
