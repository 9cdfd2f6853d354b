//! The front's Rust face: static mounts, compression, the output cache and CORS,
//! configured before start like routes; apart from front.rs, which runs per request.

use crate::cache::{Cache, CacheStats};
use crate::compress;
use crate::cors::CorsPolicy;
use crate::error::{Error, ErrorKind, Result};
use crate::filter::FilterConfig;
use crate::front::FrontConfig;
use crate::server::Server;
#[cfg(feature = "static")]
use crate::static_files::Mount;
use http::header::HeaderName;
use std::sync::Arc;

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

    /// Compresses answers with `codings` (1 gzip | 2 brotli | 4 zstd; 0 = off) from
    /// `min_bytes` on. Codings the build lacks (cargo features `gzip`, `brotli`, `zstd`)
    /// are left out.
    pub fn set_compression(&self, codings: u32, min_bytes: usize) -> Result<()> {
        if codings & !compress::ALL != 0 {
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
