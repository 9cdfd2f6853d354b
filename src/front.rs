//! What the engine does around the host, so that hosts pay nothing for it: request
//! filtering, CORS preflights, static mounts and output-cache hits before routing
//! (`enter`); storing cacheable answers, compression and CORS headers after the host
//! answered (`leave`). A server with none of it configured skips all of it.

use crate::cache::{Cache, CacheStats, Entry as CacheEntry, MARKER};
use crate::compress::{self, CompressConfig};
use crate::connstate::ConnState;
use crate::cors::{self, CorsPolicy};
use crate::engine::Run;
use crate::error::{Error, ErrorKind, Result};
use crate::filter::FilterConfig;
use crate::request::Answer;
use crate::server::Server;
#[cfg(feature = "static")]
use crate::static_files::Mount;
#[cfg(feature = "static")]
use crate::static_serve::{self, StaticRequest};
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, ETAG, ORIGIN, TRANSFER_ENCODING};
use hyper::body::Incoming;
use std::sync::Arc;

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
    /// The engine answered (filter, preflight, static file, cache hit).
    Answered(Answer),
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

pub(crate) async fn enter(run: &Run, conn: &ConnState, req: &http::Request<Incoming>) -> Entry {
    let Some(front) = &run.front else { return Entry::Pass(None) };
    let (method, uri, headers) = (req.method(), req.uri(), req.headers());
    // A malformed request (Host, too many headers) gets the router's answer (400, 431);
    // the health path is answered before any mount can shadow it.
    let path = uri.path();
    if !crate::service::host_ok(req.version(), headers) || headers.len() > run.limits.max_headers || run.health.answer(method, path).is_some() {
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
    let cors = cors::find(&front.cors, path).map(|p| front.cors.iter().position(|q| std::ptr::eq(p, q)).expect("policy is in the list"));
    let mut ctx = Ctx {
        front: front.clone(),
        origin: headers.get(ORIGIN).cloned(),
        cors,
        accept: compress::accepted(headers),
        codings: if front.compress.codings == 0 { 0 } else { front.compress.codings_for(path) },
        store: None,
    };
    if let Some(p) = cors.map(|i| &front.cors[i]) {
        if let Some(a) = p.preflight(method, headers) {
            return Entry::Answered(a);
        }
    }
    #[cfg(feature = "static")]
    if let Some((mount, rest)) = front.mounts.iter().find_map(|m| m.claims(path).map(|r| (m, r))) {
        let sreq = StaticRequest { method, path, query: uri.query(), headers, codings: ctx.codings, min_bytes: front.compress.min_bytes };
        // Boxed: the file-serving future is large, and inlined here it would be copied
        // around for every request, also those no mount claims.
        let mut a = Box::pin(static_serve::serve(mount, rest, sreq)).await;
        ctx.decorate(&mut a.headers);
        return Entry::Answered(a);
    }
    if let Some(cache) = &front.cache {
        let has_body = headers.contains_key(TRANSFER_ENCODING) || headers.get(CONTENT_LENGTH).is_some_and(|v| v.as_bytes() != b"0");
        if let Some(key) = Cache::key(method, uri, headers, has_body) {
            match cache.lookup(key, headers) {
                Some(entry) => {
                    let mut a = entry.answer();
                    ctx.compress(&mut a, Some((cache, &entry))).await;
                    ctx.decorate(&mut a.headers);
                    return Entry::Answered(a);
                }
                // An answer to HEAD may be bodiless (an explicit HEAD route): only GET's are kept.
                None if method == http::Method::GET => {
                    let kept = cache.wants_headers(key).then(|| headers.clone());
                    ctx.store = Some((uri.clone(), kept));
                }
                None => {}
            }
        }
    }
    Entry::Pass(Some(ctx))
}

/// Takes the cache marker off an answer that will not be stored, so that it never
/// reaches a client.
pub(crate) fn strip_marker(answer: &mut Answer) {
    if answer.marked && !answer.headers.is_empty() {
        answer.headers.remove(MARKER);
    }
}

/// Finishes the host's answer. Without a context only the cache marker is taken off, so
/// that it never reaches a client.
pub(crate) async fn leave(ctx: Option<Ctx>, mut answer: Answer) -> Answer {
    let Some(ctx) = ctx else {
        strip_marker(&mut answer);
        return answer;
    };
    if answer.status == 101 {
        return answer;
    }
    if answer.headers.contains_key(MARKER) {
        if let (Some(cache), Some((uri, req))) = (&ctx.front.cache, &ctx.store) {
            cache.store(Cache::key_of(uri), req.as_ref(), &answer);
        }
        answer.headers.remove(MARKER);
    }
    ctx.compress(&mut answer, None).await;
    ctx.decorate(&mut answer.headers);
    answer
}

impl Ctx {
    fn decorate(&self, headers: &mut HeaderMap) {
        if let Some(i) = self.cors {
            self.front.cors[i].decorate(self.origin.as_ref(), headers);
        }
    }

    /// Compresses a whole answer when the client, the path, the type and the size allow;
    /// a cache entry keeps the compressed copy for the next hit.
    async fn compress(&self, a: &mut Answer, entry: Option<(&Arc<Cache>, &Arc<CacheEntry>)>) {
        if self.codings == 0
            || a.streamed
            || a.file.is_some()
            || a.body.len() < self.front.compress.min_bytes
            || matches!(a.status, 204 | 206 | 304)
            || !compress::eligible(&a.headers)
        {
            return;
        }
        compress::add_vary(&mut a.headers);
        let Some(coding) = compress::negotiate(self.accept.as_ref(), self.codings) else { return };
        let packed = match entry.and_then(|(_, e)| e.encoded(coding)) {
            Some(p) => Some(p),
            None => {
                let p = compress::compress(coding, a.body.clone()).await;
                if let (Some(p), Some((cache, e))) = (&p, entry) {
                    cache.add_encoded(e, coding, p.clone());
                }
                p
            }
        };
        let Some(packed) = packed else { return };
        a.body = packed;
        compress::mark(&mut a.headers, coding);
        // A strong validator names exact bytes; these are other bytes.
        if let Some(tag) = a.headers.get(ETAG).and_then(|t| t.to_str().ok()).filter(|t| !t.starts_with("W/")) {
            if let Ok(weak) = HeaderValue::from_str(&format!("W/{tag}")) {
                a.headers.insert(ETAG, weak);
            }
        }
    }
}

fn before_start(s: &Server, f: impl FnOnce(&mut FrontConfig) -> Result<()>) -> Result<()> {
    s.configure(|c, _, _| f(&mut c.front))
}

/// The Rust face of the front: configured before start, like routes.
impl Server {
    /// Serves the files under `folder` at `prefix` (see `static_files` for `flags`);
    /// `cache_control`: the Cache-Control value of its answers (None: none).
    pub fn mount_static(&self, prefix: &str, folder: &str, flags: u32, cache_control: Option<&str>) -> Result<()> {
        #[cfg(not(feature = "static"))]
        {
            let _ = (prefix, folder, flags, cache_control);
            Err(Error::unsupported("static", "no static files"))
        }
        #[cfg(feature = "static")]
        self.mount_static_files(prefix, folder, flags, cache_control)
    }

    #[cfg(feature = "static")]
    fn mount_static_files(&self, prefix: &str, folder: &str, flags: u32, cache_control: Option<&str>) -> Result<()> {
        let mount = Arc::new(Mount::new(prefix, folder, flags, cache_control)?);
        before_start(self, |c| {
            if c.mounts.iter().any(|m| m.prefix == mount.prefix) {
                return Err(Error::new(ErrorKind::Route, format!("a static mount at {prefix:?} already exists")));
            }
            c.mounts.push(mount);
            Ok(())
        })
    }

    /// Compresses answers with `codings` (1 gzip | 2 brotli; 0 = off) from `min_bytes`
    /// on. Codings the build lacks (cargo features `gzip`, `brotli`) are left out.
    pub fn set_compression(&self, codings: u32, min_bytes: usize) -> Result<()> {
        if codings & !(compress::GZIP | compress::BR) != 0 {
            return Err(Error::new(ErrorKind::InvalidArg, format!("compression codings {codings:#x} include unknown bits")));
        }
        before_start(self, |c| {
            // Codings this build lacks are left out: a client then gets identity.
            c.compress.codings = codings & compress::BUILT;
            c.compress.min_bytes = min_bytes;
            Ok(())
        })
    }

    /// Turns compression off (or back on) for the paths under `prefix`.
    pub fn compression_path(&self, prefix: &str, enabled: bool) -> Result<()> {
        if !prefix.starts_with('/') {
            return Err(Error::new(ErrorKind::InvalidArg, format!("prefix {prefix:?} must start with '/'")));
        }
        before_start(self, |c| {
            c.compress.paths.retain(|(p, _)| p != prefix);
            c.compress.paths.push((prefix.to_owned(), enabled));
            Ok(())
        })
    }

    /// Turns the output cache on with a memory cap (0 = off).
    pub fn set_cache(&self, max_bytes: usize) -> Result<()> {
        before_start(self, |c| {
            c.cache_bytes = max_bytes;
            Ok(())
        })
    }

    /// A request header that is part of every cache key (besides the answer's Vary).
    pub fn cache_key_header(&self, name: &str) -> Result<()> {
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| Error::new(ErrorKind::InvalidArg, format!("{name:?} is not a header name")))?;
        before_start(self, |c| {
            if !c.cache_keys.contains(&name) {
                c.cache_keys.push(name);
            }
            Ok(())
        })
    }

    fn cache(&self) -> Result<Option<Arc<Cache>>> {
        match self.running_run() {
            Some(run) => match run.front.as_ref().and_then(|f| f.cache.clone()) {
                Some(c) => Ok(Some(c)),
                None => Err(Error::new(ErrorKind::State, "the output cache is off (set a memory cap before start)")),
            },
            None => Ok(None),
        }
    }

    /// Drops every cached answer whose path + query starts with `prefix` ("" = all);
    /// returns how many. 0 when the server is not running.
    pub fn cache_purge(&self, prefix: &str) -> Result<u64> {
        Ok(self.cache()?.map_or(0, |c| c.purge(prefix)))
    }

    /// The cache's counters (zeros when the server is not running).
    pub fn cache_stats(&self) -> Result<CacheStats> {
        Ok(self.cache()?.map(|c| c.stats()).unwrap_or(CacheStats { size: std::mem::size_of::<CacheStats>(), ..Default::default() }))
    }

    /// A CORS policy for the paths under its prefix (the longest prefix wins).
    pub fn cors(&self, policy: CorsPolicy) -> Result<()> {
        before_start(self, |c| {
            c.cors.retain(|p| p.prefix != policy.prefix);
            c.cors.push(policy);
            Ok(())
        })
    }

    /// Changes the request filter (IP rules, methods, paths, URL length).
    pub fn filter(&self, f: impl FnOnce(&mut FilterConfig) -> Result<()>) -> Result<()> {
        before_start(self, |c| f(&mut c.filter))
    }
}
