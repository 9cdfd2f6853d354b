"""The engine answers /metrics (Prometheus text format 0.0.4) in every reference app."""
import re

import requests


def _metrics(app):
    r = requests.get(app.url + "/metrics", timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return r.text


def _value(text, series, absent=None):
    """A series' value; `absent` when it is missing (a status code not seen yet)."""
    m = re.search(r"^%s (\S+)$" % re.escape(series), text, re.M)
    if not m and absent is not None:
        return absent
    assert m, "no %s in\n%s" % (series, text)
    return float(m.group(1))


def test_metrics_follow_the_requests(app):
    before = _metrics(app)
    for _ in range(3):
        assert requests.get(app.url + "/", timeout=10).status_code == 200
    assert requests.get(app.url + "/no/such/route", timeout=10).status_code == 404
    after = _metrics(app)
    assert _value(after, "ember_requests_total") >= _value(before, "ember_requests_total") + 5
    ok = 'ember_responses_total{code="200"}'
    assert _value(after, ok) >= _value(before, ok, absent=0) + 4   # three roots and the first /metrics
    assert _value(after, 'ember_responses_total{code="404"}') >= 1
    count = _value(after, "ember_request_duration_seconds_count")
    assert count >= _value(before, "ember_request_duration_seconds_count") + 4
    assert _value(after, 'ember_request_duration_seconds_bucket{le="+Inf"}') == count
    buckets = [float(v) for v in re.findall(r'^ember_request_duration_seconds_bucket\{le="[^"]+"\} (\S+)$', after, re.M)]
    assert buckets == sorted(buckets), "buckets must be cumulative"
    assert "# TYPE ember_request_duration_seconds histogram" in after
    assert _value(after, "ember_connections_active") >= 0


def test_metrics_path_refuses_other_methods(app):
    r = requests.post(app.url + "/metrics", data=b"x", timeout=10)
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"
    r = requests.head(app.url + "/metrics", timeout=10)
    assert r.status_code == 200 and r.content == b""
