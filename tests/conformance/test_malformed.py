"""Strict parsing: malformed requests get 400, ambiguous framing never lets a smuggled request through."""
import json

import pytest

from rawhttp import ProtocolError, RawConn, exchange, request_bytes

SMUGGLED = request_bytes("GET", "/users/SMUGGLED")


def _bad_request(app, data):
    with RawConn(app.port, timeout=5) as c:
        c.send(data)
        r = c.read_response(timeout=5)
        closed, extra, _ = c.wait_closed(3.0)
    return r, closed, extra


@pytest.mark.parametrize("data", [
    b"THIS IS NOT HTTP\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET / HTTP/1.1 extra\r\nHost: x\r\n\r\n",
    b"\x16\x03\x01\x00\xa5garbage\r\n\r\n",
    b"G\x00T / HTTP/1.1\r\nHost: x\r\n\r\n",
], ids=["words", "method-only", "extra-token", "binary", "nul-in-method"])
def test_garbage_request_line_gets_400_and_close(app, data):
    r, closed, extra = _bad_request(app, data)
    assert r.status == 400, r
    assert closed, "connection should be closed after a 400 for an unparsable request"


@pytest.mark.parametrize("line", [
    b"No colon in this line",
    b"Bad Name: space inside the name",
    b"Transfer-Encoding : chunked",
    b": empty name",
    b"X-Ctl: a\x00b",
], ids=["no-colon", "space-in-name", "space-before-colon", "empty-name", "nul-in-value"])
def test_bad_header_line_gets_400(app, line):
    data = b"GET / HTTP/1.1\r\nHost: x\r\n" + line + b"\r\n\r\n"
    r, closed, _ = _bad_request(app, data)
    assert r.status == 400, r


def test_two_different_content_lengths_get_400(app):
    data = (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"
            b"hello!" + SMUGGLED)
    r, closed, extra = _bad_request(app, data)
    assert r.status == 400, r
    assert b"SMUGGLED" not in extra


def test_comma_list_content_length_with_different_values_gets_400(app):
    data = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\nhello!"
    r, _, _ = _bad_request(app, data)
    assert r.status == 400, r


def test_non_numeric_content_length_gets_400(app):
    data = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello"
    r, _, _ = _bad_request(app, data)
    assert r.status == 400, r


@pytest.mark.parametrize("te_first", [False, True], ids=["CL-then-TE", "TE-then-CL"])
def test_content_length_with_chunked_never_answers_a_smuggled_request(app, te_first):
    # By chunked framing the body ends after "0\r\n\r\n" and SMUGGLED follows as a second
    # request; by Content-Length everything is body. RFC 9112 6.3: reject with 400, or read by
    # Transfer-Encoding and close the connection. Either way SMUGGLED must not be answered.
    chunked_body = b"0\r\n\r\n"
    cl = b"Content-Length: %d\r\n" % (len(chunked_body) + len(SMUGGLED))
    te = b"Transfer-Encoding: chunked\r\n"
    head = (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
            + (te + cl if te_first else cl + te) + b"\r\n")
    with RawConn(app.port, timeout=5) as c:
        c.send(head + chunked_body + SMUGGLED)
        r = c.read_response(timeout=5)
        closed, extra, _ = c.wait_closed(3.0)
    assert r.status in (400, 200), r
    if r.status == 200:
        assert r.body == b"", "read by Content-Length instead of Transfer-Encoding: %r" % r.body[:80]
    assert b"SMUGGLED" not in extra and b"HTTP/1." not in extra, \
        "a request smuggled behind CL+TE was answered: %r" % extra[:300]
    assert closed, "connection left open after an ambiguous CL+TE request"


def test_unsupported_transfer_encoding_is_rejected_and_nothing_smuggled(app):
    data = (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" + SMUGGLED)
    with RawConn(app.port, timeout=5) as c:
        c.send(data)
        try:
            r = c.read_response(timeout=5)
        except ProtocolError:
            r = None
        closed, extra, _ = c.wait_closed(3.0)
    assert r is not None and r.status in (400, 501), r
    assert b"SMUGGLED" not in extra and b"HTTP/1." not in extra
    assert closed


def test_server_answers_normally_after_malformed_requests(app):
    for data in (b"NONSENSE\r\n\r\n", b"GET / HTTP/1.1\r\nBad Header\r\n\r\n"):
        with RawConn(app.port) as c:
            c.send(data)
            try:
                c.read_response()
            except ProtocolError:
                pass
    with RawConn(app.port) as c:
        c.send(request_bytes("GET", "/users/ok"))
        assert c.read_response().body == b'{"id": "ok"}'


def test_negative_content_length_gets_400(app):
    data = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"
    r, _, _ = _bad_request(app, data)
    assert r.status == 400, r


@pytest.mark.parametrize("size", [b"zz", b"ffffffffffffffffff", b"-5"], ids=["non-hex", "overflow", "negative"])
def test_invalid_chunk_size_gets_400_and_nothing_smuggled(app, size):
    data = (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + size + b"\r\nhello\r\n0\r\n\r\n" + SMUGGLED)
    r, closed, extra = _bad_request(app, data)
    assert r.status == 400, r
    assert b"HTTP/1." not in extra and closed


def test_obsolete_line_folding_is_rejected_or_unfolded(app):
    # RFC 9112 5.2: a server MUST reject obs-fold with 400 or replace it with spaces
    with RawConn(app.port, timeout=5) as c:
        c.send(b"GET /inspect HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n")
        r = c.read_response()
    if r.status != 400:
        assert r.status == 200
        value = json.loads(r.body)["headers"]["x-folded"]
        assert "\r" not in value and "\n" not in value and value.replace(" ", "") == "ab", value


def test_http11_request_without_host_gets_400(app):
    # RFC 9112 3.2: a server MUST answer 400 to an HTTP/1.1 request lacking Host
    r = exchange(app.port, b"GET /users/nohost HTTP/1.1\r\n\r\n")
    assert r.status == 400, r


def test_http11_request_with_two_host_headers_gets_400(app):
    # RFC 9112 3.2: ... and to any request with more than one Host header field line
    r = exchange(app.port, b"GET /users/twohosts HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
    assert r.status == 400, r


def test_transfer_encoding_in_http10_request_never_answers_a_smuggled_request(app):
    # RFC 9112 6.1: HTTP/1.0 + Transfer-Encoding means faulty framing; close after processing
    data = (b"POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
            b"0\r\n\r\n" + SMUGGLED)
    with RawConn(app.port, timeout=5) as c:
        c.send(data)
        try:
            c.read_response(timeout=5)
        except ProtocolError:
            pass
        closed, extra, _ = c.wait_closed(3.0)
    assert b"SMUGGLED" not in extra and b"HTTP/1." not in extra, extra[:300]
    assert closed


def test_lower_case_method_is_not_treated_as_get(app):
    # methods are case-sensitive: "get" is not GET
    r = exchange(app.port, b"get / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert r.status in (400, 405, 501), r
