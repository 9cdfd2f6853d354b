"""Compression of the host's answers by the engine: gzip, brotli and zstd chosen by
Accept-Encoding (q-values; a build without a coding never sends it), Vary, the minimum size, per-path off (`/echo`), identity for
clients that did not ask."""
import json

import pytest

from engine_features import CODINGS, expected_coding, get, gunzip, unbrotli, unzstd

PAD = ("X-Pad", "p" * 1500)  # makes /inspect's JSON larger than the 1024-byte minimum


def _inspect(app, accept):
    headers = [PAD] + ([("Accept-Encoding", accept)] if accept is not None else [])
    r = get(app, "/inspect", headers)
    assert r.status == 200
    return r


@pytest.mark.parametrize("accept", [
    "gzip", "br", "gzip, deflate, br", "gzip;q=1.0, br;q=0.5", "br;q=0, gzip;q=0.2", "*", "*;q=0.3, br;q=0",
    "identity", "gzip;q=0, br;q=0", "deflate", None,
    "zstd", "gzip, deflate, br, zstd", "zstd;q=0.5, gzip", "zstd;q=0", "zstd;q=0, gzip;q=0.1", "br;q=0.5, zstd;q=0.6",
])
def test_the_coding_follows_accept_encoding(app, accept):
    coding = expected_coding(accept)
    r = _inspect(app, accept)
    assert r.header("content-encoding") == coding, (accept, r)
    if CODINGS:
        assert "Accept-Encoding" in (r.header("vary") or "")
    body = {"gzip": gunzip, "br": unbrotli, "zstd": unzstd, None: lambda b: b}[coding](r.body)
    doc = json.loads(body)
    assert doc["path"] == "/inspect" and doc["headers"]["x-pad"] == PAD[1]
    if coding:
        assert len(r.body) < len(body) / 3
        assert r.header("content-length") == str(len(r.body))


def test_small_answers_are_never_compressed(app):
    r = get(app, "/", [("Accept-Encoding", "gzip, br")])
    assert r.body == b'{"code": 1, "msg": "Hello WebAPI"}'
    assert r.header("content-encoding") is None


def test_compression_can_be_off_for_a_path(app):
    text = b"compressible text " * 500
    r = get(app, "/echo", [("Accept-Encoding", "gzip, br"), ("Content-Type", "text/plain")], method="POST", body=text)
    assert r.status == 200
    assert r.header("content-encoding") is None
    assert r.body == text


@pytest.mark.skipif("gzip" not in CODINGS, reason="this build compresses with no gzip (EMBER_COMPRESSION)")
def test_head_reports_the_compressed_length(app):
    get_r = _inspect(app, "gzip")
    with __import__("rawhttp").RawConn(app.port) as c:
        c.send(b"HEAD /inspect HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + PAD[1].encode() +
               b"\r\nAccept-Encoding: gzip\r\n\r\n")
        r = c.read_response(head_request=True)
    assert r.status == 200 and r.header("content-encoding") == "gzip"
    # Same request, same JSON except the remote port: lengths agree closely.
    assert abs(int(r.header("content-length")) - len(get_r.body)) < 16


@pytest.mark.skipif("gzip" not in CODINGS, reason="this build compresses with no gzip (EMBER_COMPRESSION)")
def test_http_clients_decode_what_they_get(app):
    requests = pytest.importorskip("requests")
    r = requests.get(app.url + "/inspect", headers={"X-Pad": PAD[1], "Accept-Encoding": "gzip"}, timeout=10)
    assert r.headers["Content-Encoding"] == "gzip"
    assert r.json()["headers"]["x-pad"] == PAD[1]


def test_curl_decodes_what_it_gets(app):
    """curl --compressed offers every coding its build decodes (Debian's: gzip, br, zstd) at
    weight 1: the engine's tie order picks among those the library has."""
    import shutil
    import subprocess
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("no curl")
    version = subprocess.run([curl, "-V"], capture_output=True, text=True).stdout
    features = set(version.lower().split("features:")[-1].split())
    offered = ", ".join(["deflate", "gzip"] + (["br"] if "brotli" in features else [])
                        + (["zstd"] if "zstd" in features else []))
    out = subprocess.run([curl, "-s", "--compressed", "-D", "-", "-H", "%s: %s" % PAD, app.url + "/inspect"],
                         capture_output=True, timeout=20)
    head, _, body = out.stdout.partition(b"\r\n\r\n")
    encoding = None
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-encoding":
            encoding = value.strip()
    assert encoding == expected_coding(offered), (offered, head)
    assert json.loads(body)["headers"]["x-pad"] == PAD[1]
