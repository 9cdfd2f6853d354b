"""Helpers for the tests of the engine's own features (static files, compression, output
cache, CORS, filters): a one-shot raw request, the served folder, and decoders for gzip,
brotli (through the system's libbrotlidec, which curl already depends on) and zstd."""
import ctypes
import ctypes.util
import gzip
import os

from appproc import REPO_ROOT
from rawhttp import exchange, request_bytes

# The served folder: conftest.py makes a copy with symlinks (sitecopy.py) and names it in
# EMBER_WWW, relative to the repository root, the app's working directory.
WWW = os.path.join(REPO_ROOT, os.environ.get("EMBER_WWW") or os.path.join("samples", "www"))

# The codings the library under test compresses with on the fly (ember_compression_codings):
# gzip in the default build, also br and zstd with the cargo features `brotli` and `zstd`,
# none in the minimal build. Precompressed siblings of static files are served whatever this
# says. Every reference app offers all three (the library leaves out what it lacks).
CODINGS = {c for c in os.environ.get("EMBER_COMPRESSION", "gzip").replace(" ", "").split(",") if c and c != "none"}


def expected_coding(accept):
    """The coding the engine must choose for this Accept-Encoding, among CODINGS."""
    if accept is None:
        return None
    weights = {}
    for item in accept.split(","):
        token, *params = [p.strip() for p in item.split(";")]
        q = 1.0
        for p in params:
            if p.lower().startswith("q="):
                q = float(p[2:])
        weights.setdefault(token.lower(), q)
    def w(c):
        if c not in CODINGS:
            return 0.0
        return weights.get(c, weights.get("*", 0.0))
    # The highest weight wins; a tie goes to zstd, then br, then gzip.
    best = max(("zstd", "br", "gzip"), key=w)
    return best if w(best) > 0 else None


def unzstd(data):
    """Decodes zstd with the `zstandard` package (tests/setup.sh installs it)."""
    import zstandard
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def www(name):
    with open(os.path.join(WWW, name), "rb") as f:
        return f.read()


def get(app, path, headers=(), method="GET", body=b"", timeout=10.0):
    """One request on a fresh connection; the path goes out exactly as given."""
    hs = list(headers)
    if body:
        hs.append(("Content-Length", str(len(body))))
    return exchange(app.port, request_bytes(method, path, hs, body), head_request=(method == "HEAD"),
                    timeout=timeout)


def gunzip(data):
    return gzip.decompress(data)


_brotli = None


def unbrotli(data):
    """Decodes brotli with libbrotlidec (BrotliDecoderDecompress)."""
    global _brotli
    if _brotli is None:
        name = ctypes.util.find_library("brotlidec") or "libbrotlidec.so.1"
        _brotli = ctypes.CDLL(name)
        _brotli.BrotliDecoderDecompress.argtypes = [ctypes.c_size_t, ctypes.c_char_p,
                                                    ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p]
    cap = max(1 << 20, len(data) * 64)
    while True:
        out = ctypes.create_string_buffer(cap)
        n = ctypes.c_size_t(cap)
        rc = _brotli.BrotliDecoderDecompress(len(data), data, ctypes.byref(n), out)
        if rc == 1:
            return out.raw[:n.value]
        if cap > 1 << 30:
            raise ValueError("not brotli data (BrotliDecoderDecompress returned %d)" % rc)
        cap *= 4
