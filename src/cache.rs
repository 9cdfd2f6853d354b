//! The output cache. A host answer carrying the pseudo-header `Ember-Cache: <seconds>`
//! is kept (the header never reaches the client) and later GET/HEAD requests for the same
//! path + query (+ the headers the answer's `Vary` names, + the server's key headers) are
//! answered from memory without calling the host. Answers that set cookies, are
//! `private`/`no-store`/`no-cache`, `Vary: *`, streamed, or too large are never kept;
//! requests carrying `Authorization` are never served from it. Memory is capped: past the
//! cap the coldest entries go (CLOCK: an entry hit since it was last passed over is given
//! another round).

use crate::compress::Coding;
use crate::request::Answer;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT_ENCODING, AGE, CACHE_CONTROL, CONTENT_ENCODING, SET_COOKIE, VARY};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The pseudo-header that marks an answer cacheable for N seconds.
pub const MARKER: &str = "ember-cache";
/// The longest time an answer may be kept: a year.
const MAX_TTL: u64 = 365 * 24 * 3600;
/// Fixed cost counted per entry besides its bytes (maps, key, bookkeeping).
const OVERHEAD: usize = 256;

/// The counters (C layout: `ember_cache_stats`). Fields are only ever appended.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// `sizeof(ember_cache_stats)` of the library that filled it.
    pub size: usize,
    /// Requests answered from the cache.
    pub hits: u64,
    /// Cacheable requests (GET/HEAD without Authorization) that found nothing.
    pub misses: u64,
    /// Answers stored.
    pub stores: u64,
    /// Entries dropped to stay under the memory cap.
    pub evictions: u64,
    /// Entries dropped because their time was up.
    pub expirations: u64,
    /// Entries removed by purges.
    pub purged: u64,
    /// Entries held now.
    pub entries: u64,
    /// Bytes held now (bodies, headers, compressed copies and a fixed overhead per entry).
    pub bytes: u64,
}

pub(crate) struct Entry {
    pub status: u16,
    /// The answer's headers as sent, `Age` included (a placeholder that each hit
    /// overwrites in place): a hit clones them and computes nothing else.
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Whether the engine may compress it (`compress::eligible`), judged once.
    pub compressible: bool,
    key: String,
    /// (header, the request's value) pairs that must match.
    vary: Vec<(HeaderName, Option<HeaderValue>)>,
    stored: Instant,
    expires: Instant,
    /// Compressed copies, made on the first hit that asks for them.
    encoded: Mutex<Vec<(Coding, Bytes)>>,
}

impl Entry {
    /// The answer to send at `now`: the stored one with its age.
    pub fn answer(&self, now: Instant) -> Answer {
        let mut a = Answer::new(self.status, self.headers.clone(), self.body.clone());
        self.set_age(&mut a.headers, now);
        // `store` took the marker off: no lookup for it on the way out.
        a.marked = false;
        a
    }

    /// The same in `map` (the request's, done with): its room is reused, nothing is
    /// allocated or freed.
    pub fn answer_in(&self, mut map: HeaderMap, now: Instant) -> Answer {
        map.clear();
        map.reserve(self.headers.len());
        let mut aged = false;
        for (name, value) in &self.headers {
            if !aged && name == AGE {
                aged = true;
                map.append(AGE, age(now.saturating_duration_since(self.stored).as_secs()));
            } else {
                map.append(name.clone(), value.clone());
            }
        }
        let mut a = Answer::new(self.status, map, self.body.clone());
        // `store` took the marker off: no lookup for it on the way out.
        a.marked = false;
        a
    }

    /// Overwrites the placeholder `Age` (exactly one, put there by `store`) in place: an
    /// insert hashed the name and probed the map on every hit.
    fn set_age(&self, headers: &mut HeaderMap, now: Instant) {
        if let Some((_, v)) = headers.iter_mut().find(|(name, _)| *name == AGE) {
            *v = age(now.saturating_duration_since(self.stored).as_secs());
        }
    }

    pub fn encoded(&self, coding: Coding) -> Option<Bytes> {
        self.encoded.lock().iter().find(|(c, _)| *c == coding).map(|(_, b)| b.clone())
    }

    fn matches(&self, req: &HeaderMap) -> bool {
        self.vary.iter().all(|(name, value)| req.get(name) == value.as_ref())
    }
}

struct Slot {
    variants: Vec<Arc<Entry>>,
    bytes: usize,
    seq: u64,
    referenced: bool,
}

#[derive(Default)]
struct Inner {
    map: foldhash::HashMap<String, Slot>,
    order: BTreeMap<u64, String>,
    next: u64,
    bytes: usize,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    stores: AtomicU64,
    evictions: AtomicU64,
    expirations: AtomicU64,
    purged: AtomicU64,
}

pub struct Cache {
    max_bytes: usize,
    key_headers: Vec<HeaderName>,
    inner: Mutex<Inner>,
    counters: Counters,
    /// Keys whose answers named request headers in Vary while the request's headers were
    /// not kept: the next miss keeps them. Bounded; cleared when full.
    varying: Mutex<std::collections::HashSet<String>>,
}

const VARYING_MAX: usize = 4096;

fn size_of(headers: &HeaderMap, body: usize, key: &str) -> usize {
    OVERHEAD + body + key.len() + headers.iter().map(|(k, v)| k.as_str().len() + v.len() + 32).sum::<usize>()
}

fn directives(headers: &HeaderMap, name: HeaderName) -> impl Iterator<Item = String> + '_ {
    headers.get_all(name).into_iter().filter_map(|v| v.to_str().ok()).flat_map(|s| s.split(',')).map(|d| {
        let d = d.trim();
        d.split('=').next().unwrap_or("").trim().to_ascii_lowercase()
    })
}

impl Cache {
    /// `max_bytes`: the memory cap; one answer may use at most a quarter of it.
    /// `key_headers`: request headers that always take part in the key.
    pub fn new(max_bytes: usize, key_headers: Vec<HeaderName>) -> Cache {
        Cache { max_bytes, key_headers, inner: Mutex::default(), counters: Counters::default(), varying: Mutex::default() }
    }

    /// The key of a request (path + query), if its answer may come from (or go into)
    /// the cache.
    #[cfg(test)]
    pub(crate) fn key<'a>(method: &http::Method, uri: &'a http::Uri, headers: &HeaderMap, has_body: bool) -> Option<&'a str> {
        Self::key_if(method, uri, headers.contains_key(http::header::AUTHORIZATION), has_body)
    }

    /// The same, told whether the request carries Authorization (the request path
    /// learns it in its one pass over the headers).
    #[inline]
    pub(crate) fn key_if<'a>(method: &http::Method, uri: &'a http::Uri, authorization: bool, has_body: bool) -> Option<&'a str> {
        if (method != http::Method::GET && method != http::Method::HEAD) || has_body || authorization {
            return None;
        }
        Some(Self::key_of(uri))
    }

    /// Path + query as sent (borrowed: a lookup costs no allocation).
    pub(crate) fn key_of(uri: &http::Uri) -> &str {
        match uri.path_and_query() {
            Some(pq) => pq.as_str().strip_suffix('?').unwrap_or(pq.as_str()),
            None => uri.path(),
        }
    }

    /// Whether a miss on `key` should keep the request's headers for `store`: only when
    /// answers there vary on request headers (learnt from an earlier answer) or the server
    /// has key headers. Other misses copy nothing.
    pub(crate) fn wants_headers(&self, key: &str) -> bool {
        !self.key_headers.is_empty() || self.varying.lock().contains(key)
    }

    /// The entry for `key` that matches the request's `headers` where the answer varies
    /// and is still fresh at `now`.
    pub(crate) fn lookup(&self, key: &str, headers: &HeaderMap, now: Instant) -> Option<Arc<Entry>> {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let found = match inner.map.get_mut(key) {
            None => None,
            Some(slot) => {
                // Usually nothing has expired: the variants are walked once, not rebuilt.
                if slot.variants.iter().any(|e| e.expires <= now) {
                    let before = slot.variants.len();
                    let mut freed = 0;
                    slot.variants.retain(|e| {
                        let live = e.expires > now;
                        if !live {
                            freed += entry_size(e);
                        }
                        live
                    });
                    slot.bytes -= freed;
                    inner.bytes -= freed;
                    self.counters.expirations.fetch_add((before - slot.variants.len()) as u64, Relaxed);
                }
                let hit = slot.variants.iter().find(|e| e.matches(headers)).cloned();
                if hit.is_some() {
                    slot.referenced = true;
                }
                if slot.variants.is_empty() {
                    let seq = slot.seq;
                    inner.map.remove(key);
                    inner.order.remove(&seq);
                }
                hit
            }
        };
        let counter = if found.is_some() { &self.counters.hits } else { &self.counters.misses };
        counter.fetch_add(1, Relaxed);
        found
    }

    /// Keeps a copy of a marked answer (without its marker) when it may be kept.
    /// `req`: the request's headers, for the ones the answer varies on (None: not kept;
    /// an answer that varies is then stored by the next miss, which keeps them).
    pub(crate) fn store(&self, key: &str, req: Option<&HeaderMap>, answer: &Answer) {
        let Some(ttl) = ttl(&answer.headers) else { return };
        let h = &answer.headers;
        let cacheable_status = matches!(answer.status, 200 | 203 | 204 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501);
        let refused = directives(h, CACHE_CONTROL).any(|d| d == "private" || d == "no-store" || d == "no-cache");
        if !cacheable_status || refused || h.contains_key(SET_COOKIE) || answer.streamed || answer.file.is_some() {
            return;
        }
        let encoded_by_host = h.contains_key(CONTENT_ENCODING);
        let mut vary = Vec::new();
        for name in directives(h, VARY) {
            if name == "*" {
                return;
            }
            // The engine compresses per request from the identity copy it keeps.
            if name == "accept-encoding" && !encoded_by_host {
                continue;
            }
            if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
                vary.push(n);
            }
        }
        vary.extend(self.key_headers.iter().cloned());
        vary.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        vary.dedup();
        if vary.contains(&ACCEPT_ENCODING) && !encoded_by_host {
            vary.retain(|n| n != ACCEPT_ENCODING);
        }
        let empty = HeaderMap::new();
        let req = match req {
            Some(r) => r,
            None if vary.is_empty() => &empty,
            None => {
                let mut varying = self.varying.lock();
                if varying.len() >= VARYING_MAX {
                    varying.clear();
                }
                varying.insert(key.to_owned());
                return;
            }
        };
        let mut headers = h.clone();
        headers.remove(MARKER);
        headers.insert(AGE, HeaderValue::from_static("0"));
        let size = size_of(&headers, answer.body.len(), key);
        if size > self.max_bytes / 4 {
            return;
        }
        let now = Instant::now();
        let entry = Arc::new(Entry {
            status: answer.status,
            compressible: crate::compress::eligible(&headers),
            headers,
            // A copy: a body lent by the host (respond_nocopy) goes back to it at once.
            body: Bytes::copy_from_slice(&answer.body),
            key: key.to_owned(),
            vary: vary.into_iter().map(|n| {
                let v = req.get(&n).cloned();
                (n, v)
            }).collect(),
            stored: now,
            expires: now + Duration::from_secs(ttl),
            encoded: Mutex::new(Vec::new()),
        });
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        if !inner.map.contains_key(key) {
            inner.next += 1;
            inner.order.insert(inner.next, key.to_owned());
        }
        let next = inner.next;
        let slot = inner.map.entry(key.to_owned()).or_insert_with(|| Slot { variants: Vec::new(), bytes: 0, seq: next, referenced: false });
        // The same variant again (two misses raced): the newer one replaces it.
        let mut freed = 0;
        slot.variants.retain(|e| {
            let same = e.vary.iter().map(|(_, v)| v).eq(entry.vary.iter().map(|(_, v)| v)) && e.vary.len() == entry.vary.len();
            if same {
                freed += entry_size(e);
            }
            !same
        });
        slot.variants.push(entry);
        slot.bytes = slot.bytes - freed + size;
        inner.bytes = inner.bytes - freed + size;
        self.counters.stores.fetch_add(1, Relaxed);
        self.evict(inner);
    }

    /// Keeps a compressed copy of an entry for later hits (if it is still held).
    pub(crate) fn add_encoded(&self, entry: &Arc<Entry>, coding: Coding, data: Bytes) {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let Some(slot) = inner.map.get_mut(&entry.key) else { return };
        if !slot.variants.iter().any(|e| Arc::ptr_eq(e, entry)) {
            return;
        }
        let mut encoded = entry.encoded.lock();
        if encoded.iter().any(|(c, _)| *c == coding) {
            return;
        }
        let n = data.len();
        encoded.push((coding, data));
        drop(encoded);
        slot.bytes += n;
        inner.bytes += n;
        self.evict(inner);
    }

    fn evict(&self, inner: &mut Inner) {
        while inner.bytes > self.max_bytes {
            let Some((seq, key)) = inner.order.pop_first() else { break };
            let Some(slot) = inner.map.get_mut(&key) else { continue };
            if slot.referenced {
                slot.referenced = false;
                inner.next += 1;
                slot.seq = inner.next;
                inner.order.insert(inner.next, key);
                continue;
            }
            debug_assert_eq!(slot.seq, seq);
            let slot = inner.map.remove(&key).expect("slot exists");
            inner.bytes -= slot.bytes;
            self.counters.evictions.fetch_add(slot.variants.len() as u64, Relaxed);
        }
    }

    /// Removes every entry whose path + query starts with `prefix` ("" = all); returns
    /// how many.
    pub fn purge(&self, prefix: &str) -> u64 {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let keys: Vec<String> = inner.map.keys().filter(|k| k.starts_with(prefix)).cloned().collect();
        let mut n = 0;
        for k in keys {
            if let Some(slot) = inner.map.remove(&k) {
                inner.order.remove(&slot.seq);
                inner.bytes -= slot.bytes;
                n += slot.variants.len() as u64;
            }
        }
        self.counters.purged.fetch_add(n, Relaxed);
        n
    }

    pub fn stats(&self) -> CacheStats {
        let (entries, bytes) = {
            let inner = self.inner.lock();
            (inner.map.values().map(|s| s.variants.len() as u64).sum(), inner.bytes as u64)
        };
        let c = &self.counters;
        CacheStats {
            size: std::mem::size_of::<CacheStats>(),
            hits: c.hits.load(Relaxed),
            misses: c.misses.load(Relaxed),
            stores: c.stores.load(Relaxed),
            evictions: c.evictions.load(Relaxed),
            expirations: c.expirations.load(Relaxed),
            purged: c.purged.load(Relaxed),
            entries,
            bytes,
        }
    }
}

fn entry_size(e: &Entry) -> usize {
    size_of(&e.headers, e.body.len(), &e.key) + e.encoded.lock().iter().map(|(_, b)| b.len()).sum::<usize>()
}

/// An `Age` value. Those under 100 s, where most hits of a busy entry fall, are slices of
/// one static string: no allocation, no formatting.
fn age(secs: u64) -> HeaderValue {
    const UNDER_100: &str = "0123456789101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";
    let at = match secs {
        0..=9 => secs as usize..secs as usize + 1,
        10..=99 => {
            let i = 10 + (secs as usize - 10) * 2;
            i..i + 2
        }
        _ => return HeaderValue::from(secs),
    };
    HeaderValue::from_static(&UNDER_100[at])
}

/// The seconds an answer asks to be kept for: `Ember-Cache: <1..31536000>`.
fn ttl(headers: &HeaderMap) -> Option<u64> {
    let v = headers.get(MARKER)?.to_str().ok()?.trim().parse::<u64>().ok()?;
    (v > 0).then_some(v.min(MAX_TTL))
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
