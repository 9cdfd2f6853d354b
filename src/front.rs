//! What the engine does around the host, so that hosts pay nothing for it: request
//! filtering, CORS preflights, static mounts and output-cache hits before routing
//! (`enter`); storing cacheable answers, compression and CORS headers after the host
//! answered (`leave`). A server with none of it configured skips all of it.

use crate::cache::{Cache, Entry as CacheEntry, MARKER};
use crate::compress::{self, Coding, CompressConfig};
use crate::connstate::ConnState;
use crate::cors::{self, CorsPolicy};
use crate::engine::Run;
use crate::filter::FilterConfig;
use crate::request::Answer;
#[cfg(feature = "static")]
use crate::static_files::Mount;
#[cfg(feature = "static")]
use crate::static_serve::{self, Served, StaticRequest};
use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT_ENCODING, ETAG, ORIGIN};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use crate::service::Head;

/// Everything configured before start.
#[derive(Clone, Default)]
pub struct FrontConfig {
    #[cfg(feature = "static")]
    pub mounts: Vec<Arc<Mount>>,
    pub compress: CompressConfig,
    /// The output cache's memory cap; 0 = no cache.
    pub cache_bytes: usize,
    pub cache_keys: Vec<HeaderName>,
    pub cors: Vec<CorsPolicy>,
    pub filter: FilterConfig,
}

impl std::fmt::Debug for FrontConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("FrontConfig");
        #[cfg(feature = "static")]
        d.field("mounts", &self.mounts);
        d.field("compress", &self.compress)
            .field("cache_bytes", &self.cache_bytes)
            .field("cors", &self.cors.len())
            .field("filter", &!self.filter.is_empty())
            .finish()
    }
}

/// The running form of `FrontConfig`.
pub(crate) struct Front {
    #[cfg(feature = "static")]
    mounts: Vec<Arc<Mount>>,
    compress: CompressConfig,
    pub cache: Option<Arc<Cache>>,
    cors: Vec<CorsPolicy>,
    filter: FilterConfig,
}

impl Front {
    /// None when nothing is configured: the request path then skips the front entirely.
    pub fn build(cfg: &FrontConfig) -> Option<Arc<Front>> {
        #[cfg(feature = "static")]
        let no_mounts = cfg.mounts.is_empty();
        #[cfg(not(feature = "static"))]
        let no_mounts = true;
        let empty = no_mounts && cfg.compress.codings == 0 && cfg.cache_bytes == 0 && cfg.cors.is_empty() && cfg.filter.is_empty();
        if empty {
            return None;
        }
        #[cfg(feature = "static")]
        let mut mounts = cfg.mounts.clone();
        // The most specific mount first.
        #[cfg(feature = "static")]
        mounts.sort_by_key(|m| std::cmp::Reverse(m.prefix.len()));
        Some(Arc::new(Front {
            #[cfg(feature = "static")]
            mounts,
            compress: cfg.compress.clone(),
            cache: (cfg.cache_bytes > 0).then(|| Arc::new(Cache::new(cfg.cache_bytes, cfg.cache_keys.clone()))),
            cors: cfg.cors.clone(),
            filter: cfg.filter.clone(),
        }))
    }
}

/// What `enter` decided.
pub(crate) enum Entry {
    /// The engine answered (filter, preflight, static file, cache hit), within the call.
    Answered(Answer),
    /// The engine answers once a large body is compressed on the blocking pool.
    Later(Pin<Box<dyn Future<Output = Answer> + Send>>),
    /// On to the host; `leave` finishes its answer.
    Pass(Option<Ctx>),
}

/// What `leave` needs to know about the request.
pub(crate) struct Ctx {
    front: Arc<Front>,
    origin: Option<HeaderValue>,
    cors: Option<usize>,
    accept: Option<HeaderValue>,
    codings: u32,
    /// The request target (its key; cloning a Uri shares its bytes) and maybe the
    /// request's headers, when the answer may be stored.
    store: Option<(http::Uri, Option<HeaderMap>)>,
}

/// The same, borrowed from the request: an answer made within the call copies nothing.
struct Look<'a> {
    front: &'a Arc<Front>,
    origin: Option<&'a HeaderValue>,
    cors: Option<usize>,
    accept: Option<&'a HeaderValue>,
    codings: u32,
}

/// How an answer is to be compressed.
enum Pack {
    /// As it is.
    Plain,
    /// With this body, compressed now.
    Packed(Coding, Bytes),
    /// With the compressed copy a cache entry keeps.
    Kept(Coding, Bytes),
    /// Too large to compress here: on the blocking pool.
    Later(Coding),
}

/// Runs before routing, within hyper's call: the answers the engine knows at once (a
/// filter's refusal, a preflight, a small static file from memory, a 304, a cache hit)
/// come back whole, with no request future made. `head`: what the request path read of
/// the headers already; `now`: the request's start when it was taken (metrics, access
/// log), so that a cache hit reads the clock once. A cache hit answers in the request's
/// own header map, taken from `req`.
pub(crate) fn enter(run: &Run, conn: &ConnState, req: &mut http::request::Parts, head: &Head, now: Option<Instant>) -> Entry {
    let Some(front) = &run.front else { return Entry::Pass(None) };
    let (method, uri, headers) = (&req.method, &req.uri, &req.headers);
    // A malformed request (Host, too many headers) gets the router's answer (400, 431);
    // the health path is answered before any mount can shadow it.
    let path = uri.path();
    if !head.host_ok || headers.len() > run.limits.max_headers || run.health.answer(method, path).is_some() {
        return Entry::Pass(None);
    }
    // The client as the host sees it: the TCP peer, the address a PROXY header named, or
    // the one a trusted proxy forwarded (X-Forwarded-For, Forwarded).
    let client = || {
        let forwarded = crate::proxy::forwarded(conn.peer.ip(), headers, &run.trusted);
        match forwarded.as_ref().and_then(|f| f.0.as_deref()) {
            Some(addr) => crate::filter::parse_client(addr),
            None if conn.remote == conn.peer_text => Some(conn.peer.ip()),
            None => crate::filter::parse_client(&conn.remote),
        }
    };
    if let Some(a) = front.filter.check_ip(method, uri, client) {
        return Entry::Answered(a);
    }
    let cors = if front.cors.is_empty() { None } else { cors::find(&front.cors, path).map(|p| front.cors.iter().position(|q| std::ptr::eq(p, q)).expect("policy is in the list")) };
    let origin = if cors.is_some() { headers.get(ORIGIN) } else { None };
    if let Some(p) = cors.map(|i| &front.cors[i]) {
        if let Some(a) = p.preflight(method, headers) {
            return Entry::Answered(a);
        }
    }
    // Accept-Encoding and the path's codings: looked up only where an answer may be
    // compressed (a hit kept too small or of the wrong type skips both).
    let look = || Look {
        front,
        origin,
        cors,
        accept: if front.compress.codings == 0 { None } else { headers.get(ACCEPT_ENCODING) },
        codings: if front.compress.codings == 0 { 0 } else { front.compress.codings_for(path) },
    };
    #[cfg(feature = "static")]
    if let Some((mount, rest)) = front.mounts.iter().find_map(|m| m.claims(path).map(|r| (m, r))) {
        let sreq = StaticRequest { method, path, query: uri.query(), headers, codings: 0, min_bytes: front.compress.min_bytes };
        return look().serve_static(mount, rest, sreq);
    }
    let mut store = None;
    if let Some(cache) = &front.cache {
        if let Some(key) = Cache::key_if(method, uri, head.authorization, !head.bodiless) {
            let now = now.unwrap_or_else(Instant::now);
            match cache.lookup(key, headers, now) {
                Some(entry) if front.may_pack(&entry.status, entry.body.len(), entry.compressible) => {
                    return look().hit(cache, entry, now);
                }
                Some(entry) => {
                    let origin = origin.cloned();
                    let mut a = entry.answer_in(std::mem::take(&mut req.headers), now);
                    if let Some(i) = cors {
                        front.cors[i].decorate(origin.as_ref(), &mut a.headers);
                    }
                    return Entry::Answered(a);
                }
                // An answer to HEAD may be bodiless (an explicit HEAD route): only GET's are kept.
                None if method == http::Method::GET => {
                    let kept = cache.wants_headers(key).then(|| headers.clone());
                    store = Some((uri.clone(), kept));
                }
                None => {}
            }
        }
    }
    Entry::Pass(Some(look().owned(store)))
}

impl Front {
    /// Whether a whole answer of this status, size and type could be compressed at all:
    /// what `Look::pack` checks first, known for a cache entry before any request header
    /// is read.
    fn may_pack(&self, status: &u16, len: usize, compressible: bool) -> bool {
        self.compress.codings != 0 && len >= self.compress.min_bytes && !matches!(status, 204 | 206 | 304) && compressible
    }
}

/// Takes the cache marker off an answer that will not be stored, so that it never
/// reaches a client.
pub(crate) fn strip_marker(answer: &mut Answer) {
    if answer.marked && !answer.headers.is_empty() {
        answer.headers.remove(MARKER);
    }
}

/// What `leave_now` leaves to be awaited: compression on the blocking pool.
pub(crate) type Rest = std::pin::Pin<Box<dyn std::future::Future<Output = Answer> + Send>>;

/// The front's part of an answer, done now unless it has to wait (a large body compressed
/// on the blocking pool): then what is left comes back to be awaited. The usual answer
/// needs no waiting, so an inline handler's request behind a front is finished in hyper's
/// call like one without it. Without a context only the cache marker is taken off, so that
/// it never reaches a client.
pub(crate) fn leave_now(ctx: Option<Ctx>, mut answer: Answer) -> std::result::Result<Answer, Rest> {
    let Some(ctx) = ctx else {
        strip_marker(&mut answer);
        return Ok(answer);
    };
    if answer.status == 101 {
        return Ok(answer);
    }
    // `marked` is false only when the answer's header block was read and had no marker:
    // the usual answer skips the look-up (a custom name hashed each time).
    if answer.marked && answer.headers.contains_key(MARKER) {
        if let (Some(cache), Some((uri, req))) = (&ctx.front.cache, &ctx.store) {
            cache.store(Cache::key_of(uri), req.as_ref(), &answer);
        }
        answer.headers.remove(MARKER);
    }
    let look = ctx.look();
    match look.pack(&mut answer, None) {
        Pack::Plain => {}
        Pack::Packed(coding, packed) | Pack::Kept(coding, packed) => packed_into(&mut answer, coding, packed),
        Pack::Later(coding) => {
            return Err(Box::pin(async move {
                if let Some(packed) = compress::compress(coding, answer.body.clone()).await {
                    packed_into(&mut answer, coding, packed);
                }
                ctx.decorate(&mut answer.headers);
                answer
            }))
        }
    }
    look.decorate(&mut answer.headers);
    Ok(answer)
}

/// Finishes the host's answer, waiting for what `leave_now` could not do at once.
pub(crate) async fn leave(ctx: Option<Ctx>, answer: Answer) -> Answer {
    match leave_now(ctx, answer) {
        Ok(a) => a,
        Err(rest) => rest.await,
    }
}

impl Ctx {
    fn look(&self) -> Look<'_> {
        Look { front: &self.front, origin: self.origin.as_ref(), cors: self.cors, accept: self.accept.as_ref(), codings: self.codings }
    }

    fn decorate(&self, headers: &mut HeaderMap) {
        self.look().decorate(headers);
    }
}

impl Look<'_> {
    /// A static mount's answer. Out of line, like the other branches of `enter` that a
    /// cache hit does not take: the hit's path stays short in the instruction cache.
    #[cfg(feature = "static")]
    #[inline(never)]
    fn serve_static(&self, mount: &Mount, rest: &str, mut sreq: StaticRequest<'_>) -> Entry {
        sreq.codings = self.codings;
        match static_serve::serve(mount, rest, sreq) {
            Served::Now(mut a) => {
                self.decorate(&mut a.headers);
                Entry::Answered(a)
            }
            Served::Compress(a, coding) => self.wait(a, coding, None),
        }
    }

    #[inline(never)]
    fn owned(&self, store: Option<(http::Uri, Option<HeaderMap>)>) -> Ctx {
        Ctx { front: self.front.clone(), origin: self.origin.cloned(), cors: self.cors, accept: self.accept.cloned(), codings: self.codings, store }
    }

    fn decorate(&self, headers: &mut HeaderMap) {
        if let Some(i) = self.cors {
            self.front.cors[i].decorate(self.origin, headers);
        }
    }

    /// A cache hit: its prebuilt answer with its age, compressed when the client asks
    /// (a copy kept with the entry, or made now and kept; a large one on the blocking pool).
    #[inline(never)]
    fn hit(&self, cache: &Arc<Cache>, entry: Arc<CacheEntry>, now: std::time::Instant) -> Entry {
        let mut a = entry.answer(now);
        match self.pack(&mut a, Some(&entry)) {
            Pack::Plain => {}
            Pack::Packed(coding, packed) => {
                cache.add_encoded(&entry, coding, packed.clone());
                packed_into(&mut a, coding, packed);
            }
            Pack::Kept(coding, packed) => packed_into(&mut a, coding, packed),
            Pack::Later(coding) => return self.wait(a, coding, Some((cache.clone(), entry))),
        }
        self.decorate(&mut a.headers);
        Entry::Answered(a)
    }

    /// The engine's answer once its body (over 16 KiB) is compressed on the blocking pool:
    /// a cache hit's (the copy is then kept with its entry) or a static file's, which
    /// carries its coding already (`Served::Compress`). One future for both: each kind of
    /// future is code in the library, whose size CI guards.
    #[cold]
    fn wait(&self, mut a: Answer, coding: Coding, hit: Option<(Arc<Cache>, Arc<CacheEntry>)>) -> Entry {
        let ctx = self.owned(None);
        Entry::Later(Box::pin(async move {
            let packed = compress::compress(coding, a.body.clone()).await;
            match hit {
                Some((cache, entry)) => {
                    if let Some(packed) = packed {
                        cache.add_encoded(&entry, coding, packed.clone());
                        packed_into(&mut a, coding, packed);
                    }
                }
                #[cfg(feature = "static")]
                None => a = static_serve::packed_or_plain(a, packed),
                #[cfg(not(feature = "static"))]
                None => drop(packed),
            }
            ctx.decorate(&mut a.headers);
            a
        }))
    }

    /// Whether and how to compress a whole answer: the client, the path, the type and the
    /// size must allow it. A cache entry's compressed copy is used when it has one.
    fn pack(&self, a: &mut Answer, entry: Option<&CacheEntry>) -> Pack {
        let eligible = || match entry {
            Some(e) => e.compressible,
            None => compress::eligible(&a.headers),
        };
        if self.codings == 0
            || a.streamed
            || a.file.is_some()
            || a.body.len() < self.front.compress.min_bytes
            || matches!(a.status, 204 | 206 | 304)
            || !eligible()
        {
            return Pack::Plain;
        }
        compress::add_vary(&mut a.headers);
        let Some(coding) = compress::negotiate(self.accept, self.codings) else { return Pack::Plain };
        if let Some(p) = entry.and_then(|e| e.encoded(coding)) {
            return Pack::Kept(coding, p);
        }
        if a.body.len() > compress::INLINE_MAX {
            return Pack::Later(coding);
        }
        match compress::compress_small(coding, &a.body) {
            Some(p) => Pack::Packed(coding, p),
            None => Pack::Plain,
        }
    }
}

/// Puts the compressed body in the answer, with its coding and a weak tag.
fn packed_into(a: &mut Answer, coding: Coding, packed: Bytes) {
    a.body = packed;
    compress::mark(&mut a.headers, coding);
    // A strong validator names exact bytes; these are other bytes.
    if let Some(tag) = a.headers.get(ETAG).and_then(|t| t.to_str().ok()).filter(|t| !t.starts_with("W/")) {
        if let Ok(weak) = HeaderValue::from_str(&format!("W/{tag}")) {
            a.headers.insert(ETAG, weak);
        }
    }
}
