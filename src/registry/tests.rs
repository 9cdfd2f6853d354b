use super::*;
use bytes::Bytes;

fn ok() -> Answer {
    Answer::new(200, http::HeaderMap::new(), Bytes::new())
}

#[test]
fn second_answer_is_refused_and_first_is_delivered() {
    let (id, mut rx) = begin(1);
    assert_ne!(id, 0);
    answer(id, ok()).unwrap();
    assert_eq!(answer(id, ok()).unwrap_err().kind, ErrorKind::AlreadyAnswered);
    assert_eq!(rx.try_recv().unwrap().status, 200);
}

#[test]
fn answer_after_timeout_or_departure_names_the_reason() {
    let (a, _rx) = begin(1);
    assert!(expire(a, true));
    assert_eq!(answer(a, ok()).unwrap_err().kind, ErrorKind::TimedOut);
    let (b, rx) = begin(1);
    drop(rx);
    assert!(expire(b, false));
    assert_eq!(answer(b, ok()).unwrap_err().kind, ErrorKind::ClientGone);
    assert!(!expire(b, true));
}

#[test]
fn views_of_an_expired_request_live_until_the_hosts_answer_attempt() {
    let (id, _rx) = begin(77);
    let data = Arc::new(RequestData::new(crate::request::Parts {
        id,
        method: "GET",
        path: "/p",
        query: "",
        remote_addr: "127.0.0.1:1",
        route: "/p",
        headers: &http::HeaderMap::new(),
        params: &[],
        body: Bytes::new(),
        http_version: 11,
        content_length: None,
        flags: 0,
        scheme: "http",
        peer_addr: "127.0.0.1:1",
    }));
    attach(id, data.clone(), true);
    assert!(expire(id, false));
    assert_eq!(Arc::strong_count(&data), 2, "the registry still holds the data");
    assert!(!expire(id, true), "a second expiry changes nothing");
    assert_eq!(Arc::strong_count(&data), 2);
    assert_eq!(answer(id, ok()).unwrap_err().kind, ErrorKind::ClientGone);
    assert_eq!(Arc::strong_count(&data), 1, "the answer attempt released it");
    let (id2, _rx2) = begin(78);
    attach(id2, data.clone(), true);
    assert!(expire(id2, true));
    purge_server(78);
    assert_eq!(Arc::strong_count(&data), 1, "stop released it");
    assert_eq!(answer(id2, ok()).unwrap_err().kind, ErrorKind::TimedOut);
}

#[test]
fn a_request_the_host_never_saw_is_freed_when_it_expires() {
    let data = Arc::new(RequestData::new(crate::request::Parts {
        id: 0,
        method: "GET",
        path: "/q",
        query: "",
        remote_addr: "127.0.0.1:1",
        route: "/q",
        headers: &http::HeaderMap::new(),
        params: &[],
        body: Bytes::from_static(b"queued body"),
        http_version: 11,
        content_length: None,
        flags: 0,
        scheme: "http",
        peer_addr: "127.0.0.1:1",
    }));
    let (id, _rx) = begin(79);
    attach(id, data.clone(), false);
    assert_eq!(Arc::strong_count(&data), 2);
    assert!(expire(id, true));
    assert_eq!(Arc::strong_count(&data), 1, "expiry of an unseen request frees its data at once");
    assert!(deliver(id).is_none(), "the queued job finds nothing to run");
    let (id2, _rx2) = begin(79);
    attach(id2, data.clone(), false);
    assert!(deliver(id2).is_some());
    assert!(expire(id2, false));
    assert_eq!(Arc::strong_count(&data), 2, "once seen, the views live until the host's answer attempt");
}

#[test]
fn garbage_handles_are_invalid_not_crashes() {
    for id in [0u64, 1, u64::MAX, 0xdead_beef_0000_0001, 1 << 32 | 0xff << 24] {
        assert_eq!(answer(id, ok()).unwrap_err().kind, ErrorKind::InvalidHandle);
        assert!(data(id).is_err());
    }
}

#[test]
fn an_answer_during_the_call_stays_on_the_thread() {
    let id = begin_here(80, None);
    let here = Here::enter(id);
    answer(id, ok()).unwrap();
    assert_eq!(answer(id, ok()).unwrap_err().kind, ErrorKind::AlreadyAnswered);
    assert_eq!(here.leave().unwrap().status, 200);
    assert!(arm(id).is_none(), "nothing is left to wait for");
}

#[test]
fn an_answer_from_another_thread_during_the_call_is_parked_for_arm() {
    let id = begin_here(81, None);
    let here = Here::enter(id);
    std::thread::spawn(move || answer(id, ok()).unwrap()).join().unwrap();
    assert!(here.leave().is_none());
    let mut rx = arm(id).expect("the parked receiver");
    assert_eq!(rx.try_recv().unwrap().status, 200);
    assert!(arm(id).is_none());
}

#[test]
fn an_answer_after_the_call_comes_through_the_armed_channel() {
    let id = begin_here(82, None);
    let here = Here::enter(id);
    assert!(here.leave().is_none());
    let mut rx = arm(id).unwrap();
    assert!(rx.try_recv().is_err());
    std::thread::spawn(move || answer(id, ok()).unwrap()).join().unwrap();
    assert_eq!(rx.try_recv().unwrap().status, 200);
    // A request begun here that expired during its call has nothing to arm.
    let id = begin_here(82, None);
    let here = Here::enter(id);
    assert!(expire(id, true));
    assert!(here.leave().is_none());
    assert!(arm(id).is_none());
    assert_eq!(answer(id, ok()).unwrap_err().kind, ErrorKind::TimedOut);
}

#[test]
fn a_nested_call_keeps_the_outer_ones_answer_apart() {
    let (outer, inner) = (begin_here(83, None), begin_here(83, None));
    let o = Here::enter(outer);
    let i = Here::enter(inner);
    answer(inner, ok()).unwrap();
    assert!(i.leave().is_some());
    answer(outer, Answer::new(201, http::HeaderMap::new(), Bytes::new())).unwrap();
    assert_eq!(o.leave().unwrap().status, 201);
}
