"""HTTP/2 with prior knowledge (h2c): curl for the exchange, raw frames to prove HEAD has no body."""
import shutil
import socket
import struct
import subprocess

import pytest

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


# --- raw HTTP/2 frames: curl -I discards DATA silently, so check the wire ourselves ---

def _frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def _hpack_literal(name, value):
    # literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2)
    def s(b):
        assert len(b) < 127
        return bytes([len(b)]) + b
    return b"\x00" + s(name) + s(value)


def _read_frames_for_stream(sock, stream_id, timeout=5.0):
    sock.settimeout(timeout)
    buf = b""
    frames = []
    while True:
        while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
            chunk = sock.recv(65536)
            if not chunk:
                return frames
            buf += chunk
        length = int.from_bytes(buf[:3], "big")
        ftype, flags = buf[3], buf[4]
        sid = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
        payload, buf = buf[9:9 + length], buf[9 + length:]
        if ftype == 4 and not flags & 1:            # SETTINGS from server: ack it
            sock.sendall(_frame(4, 1, 0, b""))
        if sid == stream_id:
            frames.append((ftype, flags, payload))
            if flags & 1 and ftype in (0, 1):       # END_STREAM on DATA/HEADERS
                return frames
            if ftype == 3:                          # RST_STREAM
                return frames


def test_http2_head_response_carries_no_data_bytes_on_the_wire(app):
    with socket.create_connection(("127.0.0.1", app.port), timeout=5) as sock:
        block = _hpack_literal(b":method", b"HEAD")   # no static entry for HEAD
        block += b"\x86"          # :scheme http (static index 6)
        block += b"\x84"          # :path / (static index 4)
        block += _hpack_literal(b":authority", b"127.0.0.1")
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(4, 0, 0, b"")
                     + _frame(1, 0x4 | 0x1, 1, block))   # HEADERS, END_HEADERS|END_STREAM
        frames = _read_frames_for_stream(sock, 1)
    types = [f[0] for f in frames]
    assert types and types[0] == 1, "expected a HEADERS frame first, got frame types %r" % types
    assert frames[0][2][:1] == b"\x88", "expected :status 200 (static index 8) first"
    data_bytes = sum(len(p) for t, _, p in frames if t == 0)
    assert data_bytes == 0, "HEAD over HTTP/2 sent %d body bytes in DATA frames" % data_bytes
    assert frames[-1][1] & 1, "stream did not end"


def test_http2_get_response_carries_the_body_on_the_wire(app):
    # the same raw client with GET must see the body: proves the HEAD check above can see DATA
    with socket.create_connection(("127.0.0.1", app.port), timeout=5) as sock:
        block = b"\x82\x86\x84" + _hpack_literal(b":authority", b"127.0.0.1")
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(4, 0, 0, b"")
                     + _frame(1, 0x4 | 0x1, 1, block))
        frames = _read_frames_for_stream(sock, 1)
    body = b"".join(p for t, _, p in frames if t == 0)
    assert frames[0][2][:1] == b"\x88"
    assert body == HELLO
