use super::*;

fn parts<'a>(path: &'a str, headers: &'a HeaderMap, params: &'a [(String, String)]) -> Parts<'a> {
    Parts {
        id: 1,
        method: "GET",
        path,
        query: "q=1",
        remote_addr: "127.0.0.1:1",
        route: "/r/{id}",
        headers,
        params,
        body: Bytes::from_static(b"body"),
        http_version: 11,
        content_length: Some(4),
        flags: 0,
        scheme: "http",
        peer_addr: "127.0.0.1:1",
    }
}

/// The layout `RequestInfo` promises: the text views back to back in their order,
/// each followed by a NUL.
#[test]
fn text_views_are_nul_terminated_and_back_to_back() {
    let mut headers = HeaderMap::new();
    headers.append("x-a", "1".parse().unwrap());
    headers.append("x-b", "".parse().unwrap());
    let params = vec![("id".to_string(), "4\u{0}2".to_string())];
    let data = RequestData::new(parts("/p", &headers, &params));
    let i = data.info();
    let start = i.method.ptr as usize;
    let end = i.peer_addr.ptr as usize + i.peer_addr.len + 1;
    // SAFETY: the promise under test: all of it lies in the request's block.
    let text = unsafe { std::slice::from_raw_parts(i.method.ptr.cast::<u8>(), end - start) };
    let want: &[u8] = b"GET\0/p\0q=1\0127.0.0.1:1\0/r/{id}\0x-a\01\0x-b\0\0id\04\02\0http\0127.0.0.1:1\0";
    assert_eq!(text, want);
    let views = [i.method, i.path, i.query, i.remote_addr, i.route];
    let mut at = start;
    for v in views {
        assert_eq!(v.ptr as usize, at);
        at += v.len + 1;
    }
    assert_eq!(i.scheme.ptr as usize + i.scheme.len + 1, i.peer_addr.ptr as usize);
}

#[test]
fn a_recycled_block_carries_the_next_request_whole() {
    let small = HeaderMap::new();
    let first = RequestData::shared(parts("/a", &small, &[]));
    RequestData::recycle(first);
    // Longer in every part than the first: the reused block has to grow.
    let mut big = HeaderMap::new();
    for n in 0..40 {
        big.append(http::HeaderName::from_bytes(format!("x-h{n}").as_bytes()).unwrap(), "v".repeat(100).parse().unwrap());
    }
    let params = vec![("id".to_string(), "é".repeat(50))];
    let second = RequestData::shared(parts(&"/b".repeat(300), &big, &params));
    assert_eq!(second.path(), "/b".repeat(300));
    assert_eq!(second.query(), "q=1");
    assert_eq!(second.headers().count(), 40);
    assert_eq!(second.header("X-H39"), Some("v".repeat(100).as_bytes()));
    assert_eq!(second.param("id"), Some("é".repeat(50).as_str()));
    assert_eq!(second.body().as_ref(), b"body");
    // A block still held elsewhere is not taken as the spare.
    let held = second.clone();
    RequestData::recycle(second);
    let third = RequestData::shared(parts("/c", &small, &[]));
    assert_eq!(held.path(), "/b".repeat(300));
    assert_eq!(third.path(), "/c");
}
