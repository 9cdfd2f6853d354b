"""zstd as a response coding through the Python binding, with http.client (which decodes
nothing, so the test sees the bytes sent) and the `zstandard` package to decode them.

Against a library built with the cargo feature `zstd` (CI: tests/run_all.sh builds one and
sets EMBER_TEST_ZSTD=1, so that a library without it fails here instead of passing the
other branch): zstd chosen by Accept-Encoding with q-values, small bodies and compressed
types left alone, a large static file compressed as it streams, a `.zst` sibling. Against
any other build: `compression_codings()` lacks zstd and zstd is never sent on the fly."""
import http.client
import json
import os

import pytest

import ember
from ember import Response

zstandard = pytest.importorskip("zstandard")
BUILT = "zstd" in ember.compression_codings()
if os.environ.get("EMBER_TEST_ZSTD") == "1":
    assert BUILT, "EMBER_TEST_ZSTD=1 but the loaded library has no zstd (cargo feature `zstd`)"

DOC = json.dumps([{"id": i, "name": "item %d" % i, "ok": i % 3 == 0} for i in range(2000)])  # 70 KB


def unzstd(data):
    # A stream of unknown length (a file compressed as it is sent) has no content size in
    # its frame header: decompressobj reads it anyway.
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def fetch(port, path, accept):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path, headers={"Accept-Encoding": accept})
    r = c.getresponse()
    body = r.read()
    c.close()
    assert r.status == 200, (path, r.status)
    return r.getheader("Content-Encoding"), r.getheader("Vary") or "", body


@pytest.fixture
def app(serve, tmp_path):
    (tmp_path / "big.txt").write_text("".join("row %d\n" % i for i in range(60000)))  # 528 KB: streamed
    (tmp_path / "app.js").write_text("console.log('plain');\n" * 100)
    (tmp_path / "app.js.zst").write_bytes(zstandard.ZstdCompressor(level=19).compress(b"console.log('zst sibling');"))

    def setup(app):
        app.compression(min_bytes=1024)
        app.static("/static", str(tmp_path))

        @app.get("/json")
        def doc(req):
            return Response(DOC, content_type="application/json")

        @app.get("/mid")
        def mid(req):
            return "medium text " * 300  # 3.6 KB: compressed within the call

        @app.get("/small")
        def small(req):
            return "tiny " * 100

        @app.get("/png")
        def png(req):
            return Response(b"\x89PNG not really " * 300, content_type="image/png")

    return serve(setup)


def test_the_binding_lists_zstd_with_its_constant():
    assert ember._front.COMPRESS_ZSTD == 4
    assert ("zstd" in ember.compression_codings()) == bool(ember._front._L.ember_compression_codings() & 4)


@pytest.mark.parametrize("path", ["/json", "/mid"])
def test_zstd_alone(app, path):
    coding, vary, body = fetch(app.port, path, "zstd")
    assert "Accept-Encoding" in vary
    if not BUILT:
        assert coding is None
        return
    assert coding == "zstd"
    plain = unzstd(body)
    assert len(body) * 4 < len(plain)
    if path == "/json":
        assert json.loads(plain) == json.loads(DOC)


@pytest.mark.parametrize("accept, built, unbuilt", [
    ("gzip, deflate, br, zstd", "zstd", "gzip"),  # what browsers send: the tie goes to zstd
    ("zstd;q=0.5, gzip", "gzip", "gzip"),
    ("zstd;q=0", None, None),
    ("zstd;q=0, gzip;q=0.1", "gzip", "gzip"),
    ("gzip;q=0.3, zstd;q=0.4", "zstd", "gzip"),
    ("*", "zstd", "gzip"),
])
def test_q_values_decide_between_zstd_and_gzip(app, accept, built, unbuilt):
    coding, _, body = fetch(app.port, "/json", accept)
    assert coding == (built if BUILT else unbuilt), accept
    decode = {"zstd": unzstd, "gzip": __import__("gzip").decompress, None: lambda b: b}[coding]
    assert json.loads(decode(body)) == json.loads(DOC)


@pytest.mark.parametrize("path", ["/small", "/png"])
def test_small_bodies_and_compressed_types_are_left_alone(app, path):
    coding, _, body = fetch(app.port, path, "zstd")
    assert coding is None and len(body) in (500, 16 * 300)


def test_a_large_static_file_is_compressed_as_it_streams(app, tmp_path):
    plain = (tmp_path / "big.txt").read_bytes()
    coding, _, body = fetch(app.port, "/static/big.txt", "zstd")
    if BUILT:
        assert coding == "zstd" and unzstd(body) == plain and len(body) * 4 < len(plain)
    else:
        assert coding is None and body == plain


def test_a_zst_sibling_is_served_by_every_build(app):
    coding, _, body = fetch(app.port, "/static/app.js", "gzip;q=0.5, zstd")
    assert coding == "zstd" and unzstd(body) == b"console.log('zst sibling');"
    coding, _, body = fetch(app.port, "/static/app.js", "zstd;q=0")
    assert coding is None and body == b"console.log('plain');\n" * 100
