"""`/static/…`: the engine serves samples/www (tests/REFERENCE_APP.md) without the host:
types, validators and 304, ranges (206/416), index.html and the folder redirect, HEAD,
files larger than the read-at-once size streamed from disk, precompressed siblings, and
every spelling of a way out of the folder refused."""
import http.client
import os
import shutil
import subprocess

import pytest

from engine_features import CODINGS, get, gunzip, unbrotli, www
from sitecopy import OUTSIDE_TEXT

HELLO = www("hello.txt")


def test_a_file_comes_with_type_length_validators_and_the_mounts_cache_control(app):
    r = get(app, "/static/hello.txt")
    assert r.status == 200
    assert r.body == HELLO
    assert r.header("content-type") == "text/plain; charset=utf-8"
    assert r.header("content-length") == str(len(HELLO))
    assert r.header("cache-control") == "public, max-age=60"
    assert r.header("accept-ranges") == "bytes"
    assert r.header("etag", "").startswith('"')
    assert r.header("last-modified", "").endswith(" GMT")


def test_types_follow_the_extension(app):
    assert get(app, "/static/style.css").header("content-type") == "text/css; charset=utf-8"
    assert get(app, "/static/pixel.png").header("content-type") == "image/png"
    assert get(app, "/static/pixel.png").body == www("pixel.png")
    assert get(app, "/static/index.html").header("content-type") == "text/html; charset=utf-8"


def test_a_folder_gets_its_index_and_one_without_the_slash_a_redirect(app):
    r = get(app, "/static/")
    assert r.status == 200 and r.body == www("index.html")
    assert get(app, "/static").status == 301
    r = get(app, "/static/docs?x=1")
    assert r.status == 301
    assert r.header("location") == "/static/docs/?x=1"
    r = get(app, "/static/docs/")
    assert r.status == 200 and r.body == www("docs/index.html")


def test_a_matching_etag_or_an_unchanged_date_gets_304_without_a_body(app):
    first = get(app, "/static/hello.txt")
    etag, modified = first.header("etag"), first.header("last-modified")
    r = get(app, "/static/hello.txt", [("If-None-Match", etag)])
    assert r.status == 304 and r.body == b""
    assert r.header("etag") == etag
    r = get(app, "/static/hello.txt", [("If-None-Match", '"other", ' + etag)])
    assert r.status == 304
    r = get(app, "/static/hello.txt", [("If-Modified-Since", modified)])
    assert r.status == 304
    # If-None-Match decides when both are present.
    r = get(app, "/static/hello.txt", [("If-None-Match", '"other"'), ("If-Modified-Since", modified)])
    assert r.status == 200 and r.body == HELLO
    r = get(app, "/static/hello.txt", [("If-Modified-Since", "Mon, 01 Jan 1990 00:00:00 GMT")])
    assert r.status == 200


def test_a_failed_if_match_gets_412(app):
    etag = get(app, "/static/hello.txt").header("etag")
    assert get(app, "/static/hello.txt", [("If-Match", '"nope"')]).status == 412
    assert get(app, "/static/hello.txt", [("If-Match", etag)]).status == 200


@pytest.mark.parametrize("spec,part", [
    ("bytes=0-4", (0, 4)), ("bytes=6-", (6, len(HELLO) - 1)), ("bytes=-4", (len(HELLO) - 4, len(HELLO) - 1)),
    ("bytes=3-1000", (3, len(HELLO) - 1)),
])
def test_one_byte_range_gets_206_with_exactly_those_bytes(app, spec, part):
    r = get(app, "/static/hello.txt", [("Range", spec)])
    assert r.status == 206, r
    start, end = part
    assert r.body == HELLO[start:end + 1]
    assert r.header("content-range") == "bytes %d-%d/%d" % (start, end, len(HELLO))
    assert r.header("content-length") == str(end - start + 1)


@pytest.mark.parametrize("spec", ["bytes=100-", "bytes=23-30", "bytes=5-2", "bytes=abc", "bytes=-0", "bytes=--1", "bytes"])
def test_a_bad_or_unsatisfiable_range_gets_416_naming_the_size(app, spec):
    r = get(app, "/static/hello.txt", [("Range", spec)])
    assert r.status == 416, (spec, r)
    assert r.header("content-range") == "bytes */%d" % len(HELLO)


def test_several_ranges_another_unit_or_a_stale_if_range_get_the_whole_file(app):
    for headers in ([("Range", "bytes=0-1, 4-5")], [("Range", "items=0-1")],
                    [("Range", "bytes=0-1"), ("If-Range", '"stale"')]):
        r = get(app, "/static/hello.txt", headers)
        assert r.status == 200 and r.body == HELLO, headers
    etag = get(app, "/static/hello.txt").header("etag")
    r = get(app, "/static/hello.txt", [("Range", "bytes=0-1"), ("If-Range", etag)])
    assert r.status == 206 and r.body == HELLO[:2]


def test_a_large_file_streams_whole_and_in_ranges(app):
    lorem = www("lorem.txt")
    assert len(lorem) > 256 * 1024
    conn = http.client.HTTPConnection("127.0.0.1", app.port, timeout=10)
    try:
        conn.request("GET", "/static/lorem.txt")
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("Content-Length") == str(len(lorem))
        assert resp.read() == lorem
        # The same connection again: a range across chunk boundaries.
        conn.request("GET", "/static/lorem.txt", headers={"Range": "bytes=100000-299999"})
        resp = conn.getresponse()
        assert resp.status == 206
        assert resp.read() == lorem[100000:300000]
    finally:
        conn.close()


def test_head_states_the_length_and_sends_no_body(app):
    r = get(app, "/static/lorem.txt", method="HEAD")
    assert r.status == 200
    assert r.header("content-length") == str(len(www("lorem.txt")))
    with __import__("rawhttp").RawConn(app.port) as c:
        c.send(b"HEAD /static/hello.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /static/hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        head = c.read_response(head_request=True)
        after = c.read_response()
    assert head.header("content-length") == str(len(HELLO))
    assert after.body == HELLO


def test_other_methods_get_405_with_allow(app):
    r = get(app, "/static/hello.txt", method="POST", body=b"x")
    assert r.status == 405
    assert r.header("allow") == "GET, HEAD"


@pytest.mark.parametrize("path", [
    "/static/../Cargo.toml", "/static/../../etc/passwd", "/static/%2e%2e/Cargo.toml", "/static/%2E%2e/%2e%2E/etc/passwd",
    "/static/%252e%252e/Cargo.toml", "/static/..%2fCargo.toml", "/static/..%5cCargo.toml", "/static/..%5c..%5cetc%5cpasswd",
    "/static/docs/%2e%2e/%2e%2e/Cargo.toml", "/static/hello.txt%00.png", "/static/C:/Windows/win.ini",
    "/static/%2fetc/passwd", "/static//etc/passwd", "/static/./hello.txt",
])
def test_ways_out_of_the_folder_are_refused(app, path):
    r = get(app, path)
    assert r.status in (403, 404), (path, r)
    assert b"[package]" not in r.body and b"root:" not in r.body


def test_a_raw_backslash_traversal_is_refused(app):
    # Some parsers take a raw backslash in the target; it must never lead out.
    r = get(app, "/static/..\\Cargo.toml")
    assert r.status in (400, 403, 404), r
    assert b"[package]" not in r.body


def test_dotfiles_and_missing_files_are_not_found(app):
    assert get(app, "/static/.hidden").status == 404
    assert get(app, "/static/%2ehidden").status == 404
    assert get(app, "/static/no-such-file.txt").status == 404
    assert get(app, "/static/hello.txt/").status == 404


def _precompressed(app, coding):
    r = get(app, "/static/app.js", [("Accept-Encoding", coding)])
    assert r.status == 200
    assert r.header("content-encoding") == coding
    assert "Accept-Encoding" in r.header("vary", "")
    # A sibling has a known length and a strong validator of its own.
    assert r.header("content-length") == str(len(r.body))
    assert r.header("etag", "").endswith('-%s"' % coding) and not r.header("etag").startswith("W/")
    return r.body


def test_precompressed_siblings_are_sent_to_clients_that_accept_them(app):
    js = www("app.js")
    assert unbrotli(_precompressed(app, "br")) == js
    assert gunzip(_precompressed(app, "gzip")) == js
    assert _precompressed(app, "br") == www("app.js.br")
    r = get(app, "/static/app.js", [("Accept-Encoding", "gzip;q=1, br;q=0.5")])
    assert r.header("content-encoding") == "gzip"
    r = get(app, "/static/app.js")
    assert r.header("content-encoding") is None and r.body == js
    r = get(app, "/static/app.js", [("Accept-Encoding", "br"), ("Range", "bytes=0-9")])
    assert r.status == 206 and r.body == js[:10] and r.header("content-encoding") is None


@pytest.mark.skipif("gzip" not in CODINGS, reason="this build compresses with no gzip (EMBER_COMPRESSION)")
def test_files_without_a_sibling_are_compressed_on_the_fly(app):
    lorem = www("lorem.txt")
    r = get(app, "/static/lorem.txt", [("Accept-Encoding", "gzip")])
    assert r.status == 200 and r.header("content-encoding") == "gzip"
    assert r.header("etag", "").startswith("W/")
    assert len(r.body) < len(lorem) // 2
    assert gunzip(r.body) == lorem
    r = get(app, "/static/style.css", [("Accept-Encoding", "br")])
    if "br" in CODINGS:
        assert r.header("content-encoding") == "br" and unbrotli(r.body) == www("style.css")
    else:
        assert r.header("content-encoding") is None and r.body == www("style.css")


def test_already_compressed_types_are_sent_as_they_are(app):
    r = get(app, "/static/pixel.png", [("Accept-Encoding", "gzip, br")])
    assert r.header("content-encoding") is None and r.body == www("pixel.png")


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_fetches_decodes_and_resumes(app, tmp_path):
    out = tmp_path / "lorem.txt"
    p = subprocess.run(["curl", "-sS", "--fail", "--compressed", "-o", str(out), app.url + "/static/lorem.txt"],
                       capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == www("lorem.txt")
    # A resumed download (-C -): curl asks for the rest with a Range.
    part = tmp_path / "part.txt"
    part.write_bytes(www("lorem.txt")[:12345])
    p = subprocess.run(["curl", "-sS", "--fail", "-C", "-", "-o", str(part), app.url + "/static/lorem.txt"],
                       capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert part.read_bytes() == www("lorem.txt")


# Symbolic links (tests/conformance/sitecopy.py adds them to the served copy). A Windows
# build under Wine sees the host's links as plain files, so these are Linux/macOS cases.
_links = pytest.mark.skipif(
    os.environ.get("EMBER_WWW_LINKS") != "1" or "wine" in os.environ.get("EMBER_APP", "").lower(),
    reason="no symlinks in the served folder (EMBER_WWW given, or a Windows build under Wine)")


@_links
@pytest.mark.parametrize("path", [
    "/static/escape.txt", "/static/escape-abs.txt", "/static/escape-dir/outside.txt",
    "/app/escape.txt", "/app/escape-abs.txt", "/app/escape-dir/outside.txt",
])
def test_symlinks_leading_out_of_the_folder_are_refused(app, path):
    r = get(app, path)
    # The SPA mount refuses too: a refusal is never turned into its index.html.
    assert r.status in (403, 404), (path, r)
    assert OUTSIDE_TEXT not in r.body
    r = get(app, path, [("Range", "bytes=0-9")])
    assert r.status in (403, 404), (path, r)
    assert OUTSIDE_TEXT[:10] not in r.body


@_links
@pytest.mark.parametrize("path", ["/static/alias.txt", "/static/alias-abs.txt"])
def test_symlinks_inside_the_folder_are_followed(app, path):
    r = get(app, path)
    assert r.status == 200 and r.body == HELLO
    assert r.header("content-type") == "text/plain; charset=utf-8"


# The second mount: /app serves the same folder as a single-page app (index.html for paths
# that name no file), Cache-Control no-cache, without precompressed siblings.

def test_a_second_mount_has_its_own_cache_control(app):
    r = get(app, "/app/hello.txt")
    assert r.status == 200 and r.body == HELLO
    assert r.header("cache-control") == "no-cache"
    assert get(app, "/static/hello.txt").header("cache-control") == "public, max-age=60"


@pytest.mark.parametrize("path", ["/app/", "/app/settings", "/app/users/42/edit", "/app/no-such.js?x=1"])
def test_the_spa_mount_answers_unknown_paths_with_its_index(app, path):
    r = get(app, path)
    assert r.status == 200, (path, r)
    assert r.body == www("index.html")
    assert r.header("content-type") == "text/html; charset=utf-8"
    assert r.header("cache-control") == "no-cache"


def test_without_the_spa_flag_unknown_paths_stay_404(app):
    assert get(app, "/static/settings").status == 404
    assert get(app, "/static/users/42/edit").status == 404


@pytest.mark.parametrize("path", ["/app/../Cargo.toml", "/app/%2e%2e/Cargo.toml", "/app/%252e%252e/Cargo.toml",
                                  "/app/..%5cCargo.toml", "/app/hello.txt%00.png"])
def test_the_spa_fallback_never_hides_a_refusal(app, path):
    r = get(app, path)
    assert r.status in (403, 404), (path, r)
    assert b"[package]" not in r.body


def test_the_spa_mount_serves_no_dotfile(app):
    r = get(app, "/app/.hidden")
    assert r.status in (200, 404)
    assert r.body != www(".hidden") and www(".hidden").strip() not in r.body


def test_a_mount_without_precompressed_siblings_does_not_send_them(app):
    r = get(app, "/app/app.js", [("Accept-Encoding", "br")])
    assert r.status == 200
    # Not the sibling's strong tag; br on the fly (a library with brotli) has a weak one.
    tag = r.header("etag", "")
    assert not (tag.startswith('"') and tag.endswith('-br"')), tag
    body = unbrotli(r.body) if r.header("content-encoding") == "br" else r.body
    assert body == www("app.js")
    assert r.header("content-encoding") in (None, "br")
    assert r.header("content-encoding") == ("br" if "br" in CODINGS else None)
