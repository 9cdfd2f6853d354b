//! The output cache's own rules, without a server: what is kept, what is found again, the
//! memory cap, purges and expiry.

use super::*;
use http::header::AUTHORIZATION;
use http::{Method, Uri};

fn key(path: &str, pairs: &[(&'static str, &'static str)]) -> (String, HeaderMap) {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_static(v));
    }
    let uri = path.parse::<Uri>().unwrap();
    (Cache::key(&Method::GET, &uri, &h, false).unwrap().to_owned(), h)
}

fn look(c: &Cache, k: &(String, HeaderMap)) -> Option<Arc<Entry>> {
    c.lookup(&k.0, &k.1, Instant::now())
}

fn put(c: &Cache, k: &(String, HeaderMap), a: &Answer) {
    c.store(&k.0, Some(&k.1), a)
}

fn answer(ttl: &'static str, body: &'static [u8], extra: &[(&'static str, &'static str)]) -> Answer {
    let mut h = HeaderMap::new();
    h.insert(MARKER, HeaderValue::from_static(ttl));
    for (k, v) in extra {
        h.append(*k, HeaderValue::from_static(v));
    }
    Answer::new(200, h, Bytes::from_static(body))
}

#[test]
fn a_marked_answer_is_kept_without_its_marker_and_found_again() {
    let c = Cache::new(1 << 20, vec![]);
    let k = key("/a?x=1", &[]);
    assert!(look(&c, &k).is_none());
    put(&c, &k, &answer("30", b"hello", &[]));
    let e = look(&c, &k).expect("hit");
    assert_eq!(e.body, Bytes::from_static(b"hello"));
    assert!(e.headers.get(MARKER).is_none());
    assert!(look(&c, &key("/a?x=2", &[])).is_none());
    let s = c.stats();
    assert_eq!((s.hits, s.misses, s.stores, s.entries), (1, 2, 1, 1));
}

#[test]
fn cookies_private_and_vary_star_are_never_kept() {
    let c = Cache::new(1 << 20, vec![]);
    let k = key("/a", &[]);
    put(&c, &k, &answer("30", b"x", &[("set-cookie", "a=b")]));
    put(&c, &k, &answer("30", b"x", &[("cache-control", "private, max-age=5")]));
    put(&c, &k, &answer("30", b"x", &[("cache-control", "no-store")]));
    put(&c, &k, &answer("30", b"x", &[("vary", "*")]));
    put(&c, &k, &answer("0", b"x", &[]));
    put(&c, &k, &answer("soon", b"x", &[]));
    assert_eq!(c.stats().stores, 0);
    let mut h = HeaderMap::new();
    h.insert(AUTHORIZATION, HeaderValue::from_static("Basic eDp5"));
    assert!(Cache::key(&Method::GET, &"/a".parse::<Uri>().unwrap(), &h, false).is_none());
    assert!(Cache::key(&Method::POST, &"/a".parse::<Uri>().unwrap(), &HeaderMap::new(), false).is_none());
}

#[test]
fn vary_headers_make_separate_entries() {
    let c = Cache::new(1 << 20, vec![HeaderName::from_static("x-tenant")]);
    let en = key("/v", &[("accept-language", "en"), ("x-tenant", "1")]);
    let de = key("/v", &[("accept-language", "de"), ("x-tenant", "1")]);
    put(&c, &en, &answer("30", b"hello", &[("vary", "Accept-Language, Accept-Encoding")]));
    assert!(look(&c, &en).is_some());
    assert!(look(&c, &de).is_none());
    assert!(look(&c, &key("/v", &[("accept-language", "en"), ("x-tenant", "2")])).is_none());
    // Accept-Encoding is the engine's business: not part of the key.
    assert!(look(&c, &key("/v", &[("accept-language", "en"), ("x-tenant", "1"), ("accept-encoding", "br")])).is_some());
}

#[test]
fn the_memory_cap_evicts_the_coldest_and_purge_removes_by_prefix() {
    static BODY: [u8; 1000] = [b'x'; 1000];
    let c = Cache::new(8 * 1024, vec![]);
    for i in 0..10 {
        let k = (format!("/p/{i}"), HeaderMap::new());
        put(&c, &k, &answer("30", &BODY, &[]));
        // Keep /p/0 warm.
        look(&c, &("/p/0".to_string(), HeaderMap::new()));
    }
    let s = c.stats();
    assert!(s.bytes <= 8 * 1024, "{s:?}");
    assert!(s.evictions > 0);
    assert!(look(&c, &("/p/0".to_string(), HeaderMap::new())).is_some());
    assert!(look(&c, &("/p/1".to_string(), HeaderMap::new())).is_none());
    let n = c.purge("/p/");
    assert_eq!(n, s.entries);
    assert_eq!(c.stats().entries, 0);
    assert_eq!(c.stats().bytes, 0);
}

#[test]
fn an_answer_that_varies_is_kept_once_the_request_headers_are() {
    let c = Cache::new(1 << 20, vec![]);
    let (k, h) = key("/v", &[("accept-language", "en")]);
    assert!(!c.wants_headers(&k));
    c.store(&k, None, &answer("30", b"x", &[("vary", "Accept-Language")]));
    assert_eq!(c.stats().stores, 0);
    assert!(c.wants_headers(&k));
    c.store(&k, Some(&h), &answer("30", b"x", &[("vary", "Accept-Language")]));
    assert!(c.lookup(&k, &h, Instant::now()).is_some());
    // No Vary: kept without the request's headers.
    c.store("/plain", None, &answer("30", b"y", &[]));
    assert!(c.lookup("/plain", &HeaderMap::new(), Instant::now()).is_some());
}

#[test]
fn expired_entries_are_dropped() {
    let c = Cache::new(1 << 20, vec![]);
    let k = key("/e", &[]);
    put(&c, &k, &answer("1", b"x", &[]));
    assert!(look(&c, &k).is_some());
    std::thread::sleep(Duration::from_millis(1100));
    assert!(look(&c, &k).is_none());
    let s = c.stats();
    assert_eq!((s.expirations, s.entries, s.bytes), (1, 0, 0));
}

#[test]
fn ages_are_the_seconds_in_decimal() {
    for n in [0u64, 7, 9, 10, 11, 42, 99, 100, 3601] {
        assert_eq!(age(n).to_str().unwrap(), n.to_string());
    }
}

#[test]
fn a_hit_in_the_requests_map_carries_only_the_entrys_headers_with_its_age() {
    let c = Cache::new(1 << 20, vec![]);
    let k = key("/a", &[]);
    put(&c, &k, &answer("30", b"x", &[("content-type", "text/plain"), ("x-two", "1"), ("x-two", "2")]));
    let e = look(&c, &k).expect("hit");
    let mut request = HeaderMap::with_capacity(16);
    for (name, value) in [("host", "a"), ("accept", "*/*"), ("x-two", "from the request"), ("age", "99")] {
        request.append(name, HeaderValue::from_static(value));
    }
    let a = e.answer_in(request, e.stored + Duration::from_secs(42));
    assert_eq!(a.headers.len(), 4, "{:?}", a.headers);
    assert_eq!(a.headers["content-type"], "text/plain");
    assert_eq!(a.headers.get_all("x-two").iter().collect::<Vec<_>>(), ["1", "2"]);
    assert_eq!(a.headers.get_all(AGE).iter().collect::<Vec<_>>(), ["42"]);
    assert!(a.headers.get("host").is_none() && a.headers.get(MARKER).is_none());
    assert!(a.headers.capacity() >= 16, "the request's room was reused");
    // The entry's own map keeps its placeholder; the clone path sets the same age.
    assert_eq!(e.headers[AGE], "0");
    assert_eq!(e.answer(e.stored + Duration::from_secs(42)).headers, a.headers);
}
