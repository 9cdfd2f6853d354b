"""The output cache: `/cached` marks its answers `Ember-Cache: T`; repeats are answered by
the engine without calling the host (the host's call counter does not move), for T
seconds, keyed by path + query; Set-Cookie and private answers are never kept; requests
with Authorization always reach the host; purge by prefix through the ABI."""
import json
import threading
import time
import uuid

import pytest

from engine_features import CODINGS, get, gunzip


def _calls(r):
    assert r.status == 200, r
    return json.loads(r.body)["calls"]


def _key():
    return "/cached?t=" + uuid.uuid4().hex


def test_a_repeat_is_answered_from_the_cache_with_its_age(app):
    key = _key()
    first = get(app, key)
    n = _calls(first)
    assert first.header("ember-cache") is None
    for _ in range(3):
        r = get(app, key)
        assert _calls(r) == n and r.body == first.body
        assert r.header("age") is not None and int(r.header("age")) >= 0
        assert r.header("ember-cache") is None
        assert r.header("content-type") == "application/json"
    # Another query is another entry: the host runs again.
    assert _calls(get(app, _key())) > n


def test_head_is_answered_from_the_cached_get(app):
    key = _key()
    n = _calls(get(app, key))
    r = get(app, key, method="HEAD")
    assert r.status == 200 and r.body == b""
    assert r.header("content-length") == str(len(json.dumps({"calls": n})))
    assert _calls(get(app, key)) == n


def test_entries_expire_after_their_time(app):
    key = _key() + "&ttl=1"
    n = _calls(get(app, key))
    assert _calls(get(app, key)) == n
    time.sleep(1.6)
    assert _calls(get(app, key)) > n


def test_answers_setting_cookies_or_private_are_never_kept(app):
    for flag, header in (("cookie=1", "set-cookie"), ("private=1", "cache-control")):
        key = _key() + "&" + flag
        r1 = get(app, key)
        r2 = get(app, key)
        assert _calls(r2) > _calls(r1), flag
        assert r2.header(header) is not None


def test_requests_with_authorization_always_reach_the_host(app):
    key = _key()
    n = _calls(get(app, key))
    r = get(app, key, [("Authorization", "Basic dXNlcjpwdw==")])
    assert _calls(r) > n
    assert _calls(get(app, key)) == n


def test_purge_by_prefix_goes_through_the_host_and_the_abi(app):
    tag = uuid.uuid4().hex
    keys = ["/cached?p=%s&i=%d" % (tag, i) for i in range(3)]
    before = [_calls(get(app, k)) for k in keys]
    assert [_calls(get(app, k)) for k in keys] == before
    r = get(app, "/cache/purge?prefix=/cached%3Fp%3D" + tag, method="POST", body=b"x")
    assert r.status == 200
    assert json.loads(r.body) == {"purged": 3}
    after = [_calls(get(app, k)) for k in keys]
    assert all(a > b for a, b in zip(after, before))
    r = get(app, "/cache/purge?prefix=/nothing-here", method="POST", body=b"x")
    assert json.loads(r.body) == {"purged": 0}


@pytest.mark.skipif("gzip" not in CODINGS, reason="this build compresses with no gzip (EMBER_COMPRESSION)")
def test_a_cached_answer_is_compressed_for_those_who_ask(app):
    key = _key() + "&pad=4000"
    plain = get(app, key)
    n = _calls(plain)
    r = get(app, key, [("Accept-Encoding", "gzip")])
    assert r.header("content-encoding") == "gzip"
    assert gunzip(r.body) == plain.body
    again = get(app, key, [("Accept-Encoding", "gzip")])
    assert again.body == r.body
    assert _calls(get(app, key)) == n


def test_bad_marks_are_refused_by_the_app_and_nothing_leaks(app):
    assert get(app, "/cached?ttl=0").status == 400
    assert get(app, "/cached?ttl=9999").status == 400


def test_concurrent_first_requests_all_get_an_answer(app):
    key = _key()
    results = []

    def one():
        results.append(get(app, key))

    threads = [threading.Thread(target=one) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 20 and all(r.status == 200 for r in results)
    n = max(_calls(r) for r in results)
    assert _calls(get(app, key)) <= n


def test_a_head_miss_is_not_kept_for_get(app):
    key = _key()
    assert get(app, key, method="HEAD").status == 200
    n = _calls(get(app, key))
    assert _calls(get(app, key)) == n
