"""HTTP/2 with prior knowledge (h2c): curl for the exchange, raw frames to prove HEAD has no body."""
import shutil
import socket
import subprocess
import time

import pytest

from rawh2 import DATA, END_STREAM, HEADERS, PREFACE, RST_STREAM, H2Conn, body_of, frame, literal, status_of

HELLO = b'{"code": 1, "msg": "Hello WebAPI"}'


def _curl_h2_reason():
    curl = shutil.which("curl")
    if not curl:
        return "curl is not installed"
    out = subprocess.run([curl, "--version"], capture_output=True, text=True).stdout
    if "HTTP2" not in out:
        return "this curl has no HTTP/2 support (no HTTP2 in `curl --version` features)"
    return None


needs_curl_h2 = pytest.mark.skipif(_curl_h2_reason() is not None, reason=str(_curl_h2_reason()))


def _curl(tmp_path, *args):
    """Returns (exit code, response head as text, body bytes, curl's stderr)."""
    body_file = tmp_path / "body"
    p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "10",
                        "-D", "-", "-o", str(body_file), *args],
                       capture_output=True, timeout=20)
    body = body_file.read_bytes() if body_file.exists() else b""
    return p.returncode, p.stdout.decode("latin-1"), body, p.stderr.decode("utf-8", "replace")


def _parse_head(head):
    lines = [l for l in head.split("\r\n") if l]
    status_line = lines[0]
    headers = {}
    for l in lines[1:]:
        name, _, value = l.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status_line, headers


@needs_curl_h2
def test_http2_prior_knowledge_get_root(app, tmp_path):
    rc, head, body, err = _curl(tmp_path, app.url + "/")
    assert rc == 0, err
    status_line, headers = _parse_head(head)
    assert status_line.startswith("HTTP/2 200"), head
    assert body == HELLO
    assert headers["content-type"] == "application/json"


@needs_curl_h2
def test_http2_prior_knowledge_head_root_has_headers_only(app):
    p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "10", "-I",
                        app.url + "/"], capture_output=True, timeout=20)
    assert p.returncode == 0, p.stderr
    status_line, headers = _parse_head(p.stdout.decode("latin-1"))
    assert status_line.startswith("HTTP/2 200"), p.stdout
    assert headers["content-type"] == "application/json"
    assert headers.get("content-length") == str(len(HELLO))


@needs_curl_h2
def test_http2_prior_knowledge_echo_post_and_404(app, tmp_path):
    p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "10",
                        "-H", "Content-Type: text/x-h2", "--data-binary", "h2 body",
                        app.url + "/echo"], capture_output=True, timeout=20)
    assert p.returncode == 0 and p.stdout == b"h2 body"
    rc, head, _, _ = _curl(tmp_path, app.url + "/missing")
    assert rc == 0 and head.startswith("HTTP/2 404"), head


# --- raw frames (rawh2.py): curl -I discards DATA silently, so check the wire ourselves ---

def test_http2_head_response_carries_no_data_bytes_on_the_wire(app):
    with H2Conn(app.port) as h2:
        h2.request(1, "HEAD", "/")
        frames = h2.read_streams([1])[1]
    types = [f[0] for f in frames]
    assert types and types[0] == HEADERS, "expected a HEADERS frame first, got frame types %r" % types
    assert status_of(frames) == 200
    assert len(body_of(frames)) == 0, "HEAD over HTTP/2 sent %d body bytes" % len(body_of(frames))
    assert frames[-1][1] & END_STREAM, "stream did not end"


def test_http2_get_response_carries_the_body_on_the_wire(app):
    # the same raw client with GET must see the body: proves the HEAD check above can see DATA
    with H2Conn(app.port) as h2:
        h2.request(1, "GET", "/")
        frames = h2.read_streams([1])[1]
    assert status_of(frames) == 200
    assert body_of(frames) == HELLO


def test_http2_streams_on_one_connection_are_served_concurrently(app):
    ids = [1, 3, 5, 7, 9]
    with H2Conn(app.port, timeout=10) as h2:
        t0 = time.monotonic()
        for sid in ids:
            h2.request(sid, "GET", "/slow?ms=500")
        frames = h2.read_streams(ids, timeout=10)
        wall = time.monotonic() - t0
    for sid in ids:
        assert status_of(frames[sid]) == 200, (sid, frames[sid])
        assert body_of(frames[sid]) == b'{"slept_ms": 500}'
    assert wall < 1.4, "5 multiplexed /slow?ms=500 took %.2f s: streams were serialized" % wall


def test_http2_unknown_path_is_404_and_connection_stays_usable(app):
    with H2Conn(app.port) as h2:
        h2.request(1, "GET", "/missing")
        assert status_of(h2.read_streams([1])[1]) == 404
        h2.request(3, "GET", "/users/h2")
        frames = h2.read_streams([3])[3]
    assert status_of(frames) == 200 and body_of(frames) == b'{"id": "h2"}'


def test_http2_idle_connection_is_closed_after_about_5_s(app):
    with H2Conn(app.port, timeout=10) as h2:
        h2.request(1, "GET", "/")
        assert status_of(h2.read_streams([1])[1]) == 200
        closed, waited = h2.wait_closed(9.0)
    assert closed, "idle HTTP/2 connection still open after %.1f s (idle timeout 5 s)" % waited
    assert 4.0 <= waited <= 8.0, "idle HTTP/2 connection closed after %.2f s" % waited


def test_partial_http2_preface_is_not_held_forever(app):
    with socket.create_connection(("127.0.0.1", app.port), timeout=8) as sock:
        sock.sendall(PREFACE[:10])
        t0 = time.monotonic()
        sock.settimeout(8)
        try:
            while sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
        except socket.timeout:
            pytest.fail("a client stuck inside the HTTP/2 preface was held for 8 s")
        assert time.monotonic() - t0 < 7.0


def test_http2_content_length_over_1_mib_gets_413_before_the_body(app):
    with H2Conn(app.port) as h2:
        h2.request(1, "POST", "/echo", [("content-length", str(1048576 + 1))], end_stream=False)
        frames = h2.read_streams([1], timeout=3)[1]
    assert status_of(frames) == 413, frames


def test_http2_echo_of_256_byte_values_round_trips(app):
    body = bytes(range(256))
    with H2Conn(app.port) as h2:
        h2.request(1, "POST", "/echo", [("content-type", "application/x-test-binary"),
                                        ("content-length", "256")], end_stream=False)
        h2.sock.sendall(frame(DATA, END_STREAM, 1, body))
        frames = h2.read_streams([1])[1]
    assert status_of(frames) == 200 and body_of(frames) == body


@needs_curl_h2
def test_http2_header_list_over_16_kib_gets_431(app, tmp_path):
    rc, head, _, err = _curl(tmp_path, "-H", "X-Big: " + "a" * 17000, app.url + "/")
    assert head.startswith("HTTP/2 431"), (rc, head, err)


@needs_curl_h2
def test_http2_fail_is_500_and_wrong_method_is_405_with_allow(app, tmp_path):
    rc, head, _, err = _curl(tmp_path, app.url + "/fail")
    assert head.startswith("HTTP/2 500"), (rc, head, err)
    rc, head, _, err = _curl(tmp_path, "-X", "DELETE", app.url + "/")
    status_line, headers = _parse_head(head)
    assert status_line.startswith("HTTP/2 405"), (rc, head, err)
    assert {"GET", "HEAD"} <= {m.strip() for m in headers.get("allow", "").split(",")}


@needs_curl_h2
def test_http2_handler_timeout_answers_503_after_about_3_s(app, tmp_path):
    t0 = time.monotonic()
    rc, head, _, err = _curl(tmp_path, app.url + "/slow?ms=5000")
    elapsed = time.monotonic() - t0
    assert head.startswith("HTTP/2 503"), (rc, head, err)
    assert 2.7 <= elapsed <= 4.5, elapsed


def test_http2_stream_reset_before_deferred_answer_does_not_hurt_server(app):
    with H2Conn(app.port) as h2:
        h2.request(1, "GET", "/slow?ms=300")
        time.sleep(0.05)
        h2.sock.sendall(frame(RST_STREAM, 0, 1, b"\x00\x00\x00\x08"))   # CANCEL
        time.sleep(0.5)   # the app answers the cancelled stream meanwhile
        h2.request(3, "GET", "/users/after-reset")
        frames = h2.read_streams([3])[3]
    assert status_of(frames) == 200 and body_of(frames) == b'{"id": "after-reset"}'
    with H2Conn(app.port) as h2:          # and a connection dropped mid-stream
        h2.request(1, "GET", "/slow?ms=200")
    time.sleep(0.4)
    with H2Conn(app.port) as h2:
        h2.request(1, "GET", "/")
        assert body_of(h2.read_streams([1])[1]) == HELLO


def test_http2_header_block_that_never_finishes_is_ended(app):
    # HEADERS without END_HEADERS, then a CONTINUATION frame announcing 1000 bytes that
    # arrive one every 300 ms: the header timeout (1000 ms) applies, however busy the client
    # looks. (Many small CONTINUATION frames would trip the HTTP/2 stack's own frame limit.)
    with H2Conn(app.port, timeout=10) as h2:
        block = literal(b":method", b"GET") + b"\x86" + literal(b":path", b"/")
        h2.sock.sendall(frame(HEADERS, 0, 1, block) + frame(9, 0, 1, b"\x86" * 1000)[:9])
        t0 = time.monotonic()
        ended = False
        while time.monotonic() - t0 < 8.0:
            try:
                h2.sock.sendall(b"\x86")
            except OSError:
                ended = True
                break
            h2.sock.settimeout(0.3)
            try:
                data = h2.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                ended = True
                break
            if data == b"":
                ended = True
                break
        elapsed = time.monotonic() - t0
    assert ended, "an unfinished HTTP/2 header block held the connection for %.1f s" % elapsed
    assert elapsed <= 4.0, "ended after %.1f s; the header timeout is 1000 ms" % elapsed


def test_http2_request_with_more_headers_than_the_limit_gets_431(app):
    # The limit is 100 headers, as on HTTP/1.1.
    with H2Conn(app.port) as h2:
        h2.request(1, "GET", "/", headers=[("x-h%d" % i, "1") for i in range(120)])
        assert status_of(h2.read_streams([1])[1]) == 431
        h2.request(3, "GET", "/")
        assert status_of(h2.read_streams([3])[3]) == 200, "the connection still serves"
