//! `ember_server_set_cache` and friends: the output cache.
//!
//! Lifecycle: 1. `ember_server_set_cache` (a memory cap) and maybe
//! `ember_server_cache_key_header`, before start 2. handlers mark answers cacheable with
//! the header `Ember-Cache: <seconds>` 3. `ember_server_cache_purge` and
//! `ember_server_cache_stats` while running, from any thread.

use super::args::{self, c_str};
use super::boundary::guard;
use super::server::{ember_server, get};
use super::types::ember_result;
use crate::cache::CacheStats;
use std::os::raw::c_char;

/// Turns the output cache on with a memory cap of `max_bytes` (0 = off, the default).
///
/// An answer whose headers include `Ember-Cache: N` (N seconds, 1 to 31536000) is kept
/// for N seconds; the engine removes that header, so it never reaches a client. Later
/// GET and HEAD requests with the same path and query (and the same values of the
/// headers the answer's `Vary` names, and of the key headers) are answered from memory,
/// without calling the host, with an `Age` header. Never kept: answers with
/// `Set-Cookie`, `Cache-Control: private`, `no-store` or `no-cache`, `Vary: *`, streamed
/// answers, statuses other than 200, 203, 204, 300, 301, 308, 404, 405, 410, 414 and 501,
/// and answers larger than a quarter of the cap. Requests with `Authorization` or a body
/// always reach the host. Compressed copies are made on demand and kept with the entry.
/// Past the cap the coldest entries are dropped. Before start only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_set_cache(server: *mut ember_server, max_bytes: u64) -> ember_result {
    guard(|| get(server)?.set_cache(usize::try_from(max_bytes).unwrap_or(usize::MAX)))
}

/// Makes request header `name` part of every cache key ("Accept-Language", "X-Tenant"),
/// as if every cached answer named it in `Vary`. Before start only. Copied.
#[no_mangle]
pub unsafe extern "C" fn ember_server_cache_key_header(server: *mut ember_server, name: *const c_char) -> ember_result {
    guard(|| get(server)?.cache_key_header(c_str(name, "name")?))
}

/// Drops every cached answer whose path + query starts with `prefix` ("/products/" ;
/// "" drops all). `*out_count` (NULL is fine) receives how many went. Any thread, also
/// from a handler. On a server that is not running nothing is cached: 0.
/// `EMBER_ERR_STATE` when the cache is off.
#[no_mangle]
pub unsafe extern "C" fn ember_server_cache_purge(server: *mut ember_server, prefix: *const c_char, out_count: *mut u64) -> ember_result {
    guard(|| {
        let n = get(server)?.cache_purge(c_str(prefix, "prefix")?)?;
        if !out_count.is_null() {
            args::write(out_count, "out_count", n)?;
        }
        Ok(())
    })
}

/// Copies the cache's counters into `*out_stats` (zeros on a server that is not
/// running). `stats_size` is `sizeof(ember_cache_stats)` as the caller knows it: at most
/// that many bytes are written; `out_stats->size` tells how many the library filled.
/// `EMBER_ERR_STATE` when the cache is off. Any thread.
#[no_mangle]
pub unsafe extern "C" fn ember_server_cache_stats(server: *const ember_server, out_stats: *mut CacheStats, stats_size: usize) -> ember_result {
    guard(|| {
        let s = get(server)?;
        if out_stats.is_null() {
            return Err(args::null("out_stats"));
        }
        args::write_sized(out_stats, stats_size, "out_stats", s.cache_stats()?)
    })
}
