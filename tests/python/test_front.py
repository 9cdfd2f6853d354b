"""The engine's own features through the Python binding: static mounts (SPA fallback,
dotfiles, symlinks, a large file streamed without holding it), compression of handler
answers, the output cache (stats, purge, key headers, lent bodies), CORS with
credentials, IP allow lists, and errors that name what is wrong."""
import ctypes
import ctypes.util
import gzip
import os
import socket
import time

import pytest
import requests

import ember
from ember import Response


def _unbrotli(data):
    lib = ctypes.CDLL(ctypes.util.find_library("brotlidec") or "libbrotlidec.so.1")
    lib.BrotliDecoderDecompress.argtypes = [ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p]
    n = ctypes.c_size_t(len(data) * 64 + 4096)
    out = ctypes.create_string_buffer(n.value)
    assert lib.BrotliDecoderDecompress(len(data), data, ctypes.byref(n), out) == 1
    return out.raw[:n.value]


def _raw(port, request, source=None):
    s = socket.socket()
    if source:
        s.bind((source, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(request)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), head.decode("latin-1"), body


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    (root / "app").mkdir(parents=True)
    (root / "index.html").write_text("<h1>spa</h1>")
    (root / "app" / "main.js").write_text("console.log('main');\n" * 200)
    (root / ".env").write_text("SECRET=1")
    outside = tmp_path / "outside.txt"
    outside.write_text("outside the root")
    os.symlink(outside, root / "leak.txt")
    os.symlink(root / "index.html", root / "alias.html")
    return root


def test_spa_fallback_dotfiles_and_symlinks(serve, site, dispatch):
    def setup(app):
        app.static("/", str(site), spa=True)
        app.static("/dots", str(site), dotfiles=True, index=False)

    s = serve(setup, dispatch=dispatch)
    r = requests.get(s.url + "/some/client/route")
    assert r.status_code == 200 and r.text == "<h1>spa</h1>"
    assert requests.get(s.url + "/app/main.js").text.startswith("console.log")
    assert requests.get(s.url + "/.env").status_code == 404
    assert requests.get(s.url + "/dots/.env").text == "SECRET=1"
    assert requests.get(s.url + "/dots/").status_code == 404  # no index, no listing
    assert requests.get(s.url + "/alias.html").text == "<h1>spa</h1>"
    r = requests.get(s.url + "/leak.txt")
    assert r.status_code == 403 and "outside" not in r.text


def test_a_small_file_changed_on_disk_is_served_fresh(serve, tmp_path):
    # Small files are kept in memory once they have settled (2 s after their last change)
    # and revalidated on every hit: each change below must show on the very next request.
    root = tmp_path / "www"
    root.mkdir()
    page = root / "page.txt"
    page.write_text("aaaa")
    outside = tmp_path / "secret.txt"
    outside.write_text("ssss")
    time.sleep(2.5)  # let it settle, so that the engine keeps it
    s = serve(lambda app: app.static("/s", str(root)))
    with requests.Session() as c:
        for _ in range(3):  # the first read keeps it, the next ones are hits
            r = c.get(s.url + "/s/page.txt")
            assert r.status_code == 200 and r.text == "aaaa"
        tag = r.headers["ETag"]
        with open(page, "r+") as f:  # same size, same inode, written in place
            f.write("bbbb")
        r = c.get(s.url + "/s/page.txt")
        assert r.text == "bbbb" and r.headers["ETag"] != tag
        tmp = root / "new.tmp"
        tmp.write_text("cccc")
        os.replace(tmp, page)  # another inode under the same name
        assert c.get(s.url + "/s/page.txt").text == "cccc"
        time.sleep(2.5)
        assert c.get(s.url + "/s/page.txt").text == "cccc"  # kept again
        os.remove(page)
        os.symlink(outside, page)  # a kept name now leads out of the folder
        r = c.get(s.url + "/s/page.txt")
        assert r.status_code == 403 and "ssss" not in r.text
        os.remove(page)
        assert c.get(s.url + "/s/page.txt").status_code == 404
        # A range of a kept file comes from memory too.
        page.write_text("0123456789")
        time.sleep(2.5)
        assert c.get(s.url + "/s/page.txt").text == "0123456789"
        r = c.get(s.url + "/s/page.txt", headers={"Range": "bytes=2-4"})
        assert r.status_code == 206 and r.text == "234" and r.headers["Content-Range"] == "bytes 2-4/10"


def _rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_a_large_file_streams_without_being_held_in_memory(serve, tmp_path):
    big = tmp_path / "big.bin"
    size = 48 << 20
    with open(big, "wb") as f:
        f.truncate(size)  # sparse: zeros from the page cache, no disk
        f.seek(size - 5)
        f.write(b"tail!")
    s = serve(lambda app: app.static("/files", str(tmp_path)))
    before = _rss_kb()
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.sendall(b"GET /files/big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    got, peak = 0, before
    tail = b""
    while True:
        chunk = sock.recv(32 * 1024)
        if not chunk:
            break
        got += len(chunk)
        tail = (tail + chunk)[-5:]
        if got % (4 << 20) < 32 * 1024:
            time.sleep(0.05)  # a slow reader: the engine must wait, not buffer
            peak = max(peak, _rss_kb())
    sock.close()
    assert tail == b"tail!"
    assert got > size
    # The whole file in memory would be 48 MiB; two 128 KiB chunks plus buffers are not.
    assert peak - before < 24 * 1024, (before, peak)
    status, head, body = _raw(s.port, b"GET /files/big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=-5\r\nConnection: close\r\n\r\n")
    assert status == 206 and body == b"tail!"


def test_handler_answers_are_compressed_by_the_engine(serve, dispatch):
    text = "word " * 10000  # 50 KB: compressed on the blocking pool

    def setup(app):
        app.compression(min_bytes=100)
        app.compression_path("/raw", False)

        @app.get("/text")
        def t(req):
            return Response(text, headers={"ETag": '"v1"'})

        @app.get("/raw/text")
        def r(req):
            return text

        @app.get("/no-transform")
        def nt(req):
            return Response(text, headers={"Cache-Control": "no-transform"})

        @app.get("/encoded")
        def enc(req):
            return Response(gzip.compress(b"x" * 1000), headers={"Content-Encoding": "gzip"}, content_type="text/plain")

        @app.get("/small")
        def small(req):
            return "tiny"

    s = serve(setup, dispatch=dispatch)
    r = requests.get(s.url + "/text", headers={"Accept-Encoding": "gzip"})
    assert r.headers["Content-Encoding"] == "gzip" and r.text == text
    assert r.headers["ETag"] == 'W/"v1"'
    assert "Accept-Encoding" in r.headers["Vary"]
    status, head, body = _raw(s.port, b"GET /text HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br\r\nConnection: close\r\n\r\n")
    if "br" in ember.compression_codings():
        assert "content-encoding: br" in head.lower() and "content-length" in head.lower()
        assert _unbrotli(body).decode() == text
    else:
        assert "content-encoding" not in head.lower() and body.decode() == text
    for path in ("/raw/text", "/no-transform", "/small"):
        r = requests.get(s.url + path, headers={"Accept-Encoding": "gzip"})
        assert "Content-Encoding" not in r.headers, path
    r = requests.get(s.url + "/encoded", headers={"Accept-Encoding": "gzip"})
    assert r.content == b"x" * 1000  # gzip once, decoded once by requests


def test_the_output_cache_through_the_binding(serve, dispatch):
    calls = {"n": 0}
    big = b"B" * (2 << 20)  # lent to the engine (over the binding's no-copy size)

    def setup(app):
        app.output_cache(16 << 20, key_headers=["X-Tenant"])

        @app.get("/c")
        def c(req):
            calls["n"] += 1
            return Response(str(calls["n"]), headers={ember.CACHE_HEADER: "30"})

        @app.get("/big")
        def b(req):
            calls["n"] += 1
            return Response(big, cache_for=30)

        @app.post("/purge")
        def p(req):
            return {"purged": app.cache_purge(req.query.get("prefix", ""))}

    s = serve(setup, dispatch=dispatch)
    assert requests.get(s.url + "/c", headers={"X-Tenant": "a"}).text == "1"
    assert requests.get(s.url + "/c", headers={"X-Tenant": "a"}).text == "1"
    assert requests.get(s.url + "/c", headers={"X-Tenant": "b"}).text == "2"
    for _ in range(3):
        r = requests.get(s.url + "/big")
        assert r.content == big and "Ember-Cache" not in r.headers
    assert calls["n"] == 3
    st = s.app.cache_stats()
    assert st["hits"] == 3 and st["stores"] == 3 and st["entries"] == 3 and st["bytes"] > len(big)
    assert requests.post(s.url + "/purge?prefix=/c").json() == {"purged": 2}
    assert s.app.cache_purge("") == 1
    assert s.app.cache_stats()["entries"] == 0
    for bad in (0, -1, 31536001, "30", 1.5):
        with pytest.raises(ValueError, match="cache_for"):
            Response("x", cache_for=bad)


def test_large_engine_answers_are_compressed_on_the_pool_and_cache_copies_kept(serve, tmp_path):
    """Answers the engine makes itself wait only for a body over 16 KiB to compress: a cache
    hit (its compressed copy then kept with the entry) and a static file compressed on the
    fly. A small one is compressed within the call."""
    text = "cached words " * 4000  # 52 KB
    page = "static words " * 3000  # 39 KB, no precompressed sibling
    (tmp_path / "page.txt").write_text(page)
    (tmp_path / "small.txt").write_text("short text " * 200)
    calls = {"n": 0}

    def setup(app):
        app.output_cache(16 << 20)
        app.compression(min_bytes=100)
        app.static("/s", str(tmp_path))

        @app.get("/big")
        def b(req):
            calls["n"] += 1
            return Response(text, cache_for=30)

    s = serve(setup, dispatch="inline")
    assert requests.get(s.url + "/big").text == text  # stored
    before = s.app.cache_stats()["bytes"]
    for _ in range(3):
        r = requests.get(s.url + "/big", headers={"Accept-Encoding": "gzip"})
        assert r.headers["Content-Encoding"] == "gzip" and r.text == text
        assert "Age" in r.headers and "Accept-Encoding" in r.headers["Vary"]
    assert calls["n"] == 1
    st = s.app.cache_stats()
    # The compressed copy is kept with the entry, once.
    assert st["hits"] == 3 and st["bytes"] - before == int(r.headers["Content-Length"])
    for path, body in (("/s/page.txt", page), ("/s/small.txt", "short text " * 200)):
        for _ in range(2):
            r = requests.get(s.url + path, headers={"Accept-Encoding": "gzip"})
            assert r.status_code == 200 and r.headers["Content-Encoding"] == "gzip", path
            assert r.text == body and r.headers["ETag"].startswith('W/"'), path
        r = requests.get(s.url + path, headers={"Accept-Encoding": "identity"})
        assert "Content-Encoding" not in r.headers and r.text == body
        assert r.headers["Content-Length"] == str(len(body)) and not r.headers["ETag"].startswith("W/")


def test_cors_with_credentials_and_ip_allow_lists(serve):
    def setup(app):
        app.cors("/", "*", credentials=True, max_age=60)
        app.allow_ip("127.0.0.1")
        app.allow_ip("127.0.4.0/24")
        app.deny_ip("127.0.4.4")
        app.max_url_bytes(100)

        @app.get("/x")
        def x(req):
            return "x"

    s = serve(setup)
    r = requests.get(s.url + "/x", headers={"Origin": "https://any.example"})
    assert r.headers["Access-Control-Allow-Origin"] == "https://any.example"
    assert r.headers["Access-Control-Allow-Credentials"] == "true"
    assert _raw(s.port, b"GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "127.0.4.9")[0] == 200
    assert _raw(s.port, b"GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "127.0.4.4")[0] == 403
    assert _raw(s.port, b"GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "127.0.5.1")[0] == 403
    assert requests.get(s.url + "/x?" + "q" * 100).status_code == 414


def test_bad_settings_fail_start_with_the_engines_message(tmp_path):
    app = ember.Server()
    app.static("/s", str(tmp_path / "missing"))
    with pytest.raises(ember.EmberError) as e:
        app.start(0)
    assert "missing" in str(e.value) and e.value.name == "EMBER_ERR_INVALID_ARG"
    assert not app.running
    app = ember.Server()
    app.cors("/api", "not an origin")
    with pytest.raises(ember.EmberError):
        app.start(0)
    app = ember.Server()
    app.start(0)
    try:
        with pytest.raises(RuntimeError):
            app.deny_ip("10.0.0.1")
        with pytest.raises(ember.EmberError) as e:
            app.cache_stats()  # the cache is off
        assert e.value.name == "EMBER_ERR_STATE"
    finally:
        app.stop()
