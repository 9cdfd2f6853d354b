"""What the engine does without calling Python: static files, compression, the output
cache, CORS and request filtering (``ember_server_static`` and friends).

``Server`` inherits these methods. Each one records a setting before ``start()`` (like
routes); ``start()`` hands them all to the engine, so a bad one fails there with the
engine's message. A handler marks its answer cacheable with the header
``Ember-Cache: <seconds>`` (``CACHE_HEADER``); the engine removes it before sending.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, byref, c_bool, c_char_p, c_int32, c_size_t, c_uint32, c_uint64
from typing import Any, Callable, Iterable

from . import _lib
from .errors import check

STATIC_INDEX = 1
STATIC_PRECOMPRESSED = 2
STATIC_SPA = 4
STATIC_DOTFILES = 8
COMPRESS_GZIP = 1
COMPRESS_BR = 2
COMPRESS_ZSTD = 4
CORS_CREDENTIALS = 1

#: The response header that marks an answer cacheable for that many seconds.
CACHE_HEADER = "Ember-Cache"


class CacheStats(Structure):
    _fields_ = [("size", c_size_t)] + [
        (name, c_uint64)
        for name in ("hits", "misses", "stores", "evictions", "expirations", "purged", "entries", "bytes")
    ]


_server_p = POINTER(_lib.Server)
_L = _lib.lib
for _name, _args in {
    "ember_server_static": [_server_p, c_char_p, c_char_p, c_uint32, c_char_p],
    "ember_server_set_compression": [_server_p, c_uint32, c_uint64],
    "ember_server_compression_path": [_server_p, c_char_p, c_bool],
    "ember_server_set_cache": [_server_p, c_uint64],
    "ember_server_cache_key_header": [_server_p, c_char_p],
    "ember_server_cache_purge": [_server_p, c_char_p, POINTER(c_uint64)],
    "ember_server_cache_stats": [_server_p, POINTER(CacheStats), c_size_t],
    "ember_server_cors": [_server_p, c_char_p, c_char_p, c_char_p, c_char_p, c_char_p, c_uint32, c_uint32],
    "ember_server_filter_ip": [_server_p, c_char_p, c_bool],
    "ember_server_filter_methods": [_server_p, c_char_p],
    "ember_server_filter_path": [_server_p, c_char_p],
    "ember_server_filter_max_url": [_server_p, c_uint64],
}.items():
    _fn = getattr(_L, _name)
    _fn.restype, _fn.argtypes = c_int32, _args
_L.ember_compression_codings.restype, _L.ember_compression_codings.argtypes = c_uint32, []


def compression_codings() -> set[str]:
    """The codings the loaded engine compresses with on the fly ("gzip", "br", "zstd")."""
    bits = _L.ember_compression_codings()
    return {name for bit, name in ((COMPRESS_GZIP, "gzip"), (COMPRESS_BR, "br"), (COMPRESS_ZSTD, "zstd"))
            if bits & bit}


def _z(s: str | None) -> bytes | None:
    return None if s is None else s.encode("utf-8")


def _csv(v: str | Iterable[str] | None) -> str | None:
    if v is None or isinstance(v, str):
        return v
    return ", ".join(v)


class FrontMixin:
    """Static files, compression, output cache, CORS and filters for ``Server``."""

    def _front_steps(self) -> list[Callable[[Any], None]]:
        steps = self.__dict__.get("_front")
        if steps is None:
            steps = self.__dict__["_front"] = []
        return steps

    def _front_add(self, step: Callable[[Any], None]) -> None:
        if getattr(self, "_native", None) is not None:
            raise RuntimeError("ember: configure static files, compression, cache, CORS and filters before start()")
        self._front_steps().append(step)

    def _apply_front(self, ptr: Any) -> None:
        for step in self._front_steps():
            step(ptr)

    # -- static files ------------------------------------------------------------------
    def static(self, prefix: str, folder: str, *, index: bool = True, precompressed: bool = True,
               spa: bool = False, dotfiles: bool = False, cache_control: str | None = None) -> None:
        """Serves the files under ``folder`` at ``prefix`` ("/static"), in the engine:
        ETag/Last-Modified with 304, byte ranges (206/416), ``index.html`` for folders,
        ``.br``/``.gz`` siblings (``precompressed``), ``spa`` fallback to the mount's
        index.html, dotfiles refused unless ``dotfiles``; traversal attempts get 403."""
        flags = ((STATIC_INDEX if index else 0) | (STATIC_PRECOMPRESSED if precompressed else 0)
                 | (STATIC_SPA if spa else 0) | (STATIC_DOTFILES if dotfiles else 0))
        self._front_add(lambda p: check(_L.ember_server_static(p, _z(prefix), _z(str(folder)), flags, _z(cache_control)),
                                        "ember_server_static"))

    # -- compression -------------------------------------------------------------------
    def compression(self, gzip: bool = True, br: bool = True, min_bytes: int = 1024, *, zstd: bool = True) -> None:
        """Compresses answers (and static files) for clients that accept it, with the codings
        asked for that the loaded engine has (``compression_codings()``; br and zstd on the fly
        need the cargo features ``brotli`` and ``zstd``). A tie of weights in the client's
        Accept-Encoding goes to zstd, then br, then gzip."""
        codings = (COMPRESS_GZIP if gzip else 0) | (COMPRESS_BR if br else 0) | (COMPRESS_ZSTD if zstd else 0)
        self._front_add(lambda p: check(_L.ember_server_set_compression(p, codings, min_bytes),
                                        "ember_server_set_compression"))

    def compression_path(self, prefix: str, enabled: bool) -> None:
        """Compression off (or on) for the paths under ``prefix``."""
        self._front_add(lambda p: check(_L.ember_server_compression_path(p, _z(prefix), enabled),
                                        "ember_server_compression_path"))

    # -- output cache ------------------------------------------------------------------
    def output_cache(self, max_bytes: int = 64 << 20, key_headers: Iterable[str] = ()) -> None:
        """Turns the output cache on. Answers carrying ``Ember-Cache: <seconds>`` are then
        served from memory for that long without calling the handler."""
        names = list(key_headers)

        def apply(p: Any) -> None:
            check(_L.ember_server_set_cache(p, max_bytes), "ember_server_set_cache")
            for name in names:
                check(_L.ember_server_cache_key_header(p, _z(name)), "ember_server_cache_key_header")
        self._front_add(apply)

    def _with_native(self, fn: Callable[[Any], Any]) -> Any:
        native = getattr(self, "_native", None)
        if native is None or not native.enter():
            return None
        try:
            return fn(native.ptr)
        finally:
            native.leave()

    def cache_purge(self, prefix: str = "") -> int:
        """Drops cached answers whose path + query starts with ``prefix`` ("" = all);
        returns how many. Also from inside a handler. 0 when not running."""
        def purge(ptr: Any) -> int:
            n = c_uint64()
            check(_L.ember_server_cache_purge(ptr, _z(prefix), byref(n)), "ember_server_cache_purge")
            return n.value
        n = self._with_native(purge)
        return 0 if n is None else n

    def cache_stats(self) -> dict[str, int]:
        """The output cache's counters: hits, misses, stores, evictions, expirations,
        purged, entries, bytes (zeros when not running)."""
        def stats(ptr: Any) -> dict[str, int]:
            s = CacheStats()
            check(_L.ember_server_cache_stats(ptr, byref(s), ctypes.sizeof(s)), "ember_server_cache_stats")
            return {name: getattr(s, name) for name, _ in CacheStats._fields_ if name != "size"}
        out = self._with_native(stats)
        return out if out is not None else {name: 0 for name, _ in CacheStats._fields_ if name != "size"}

    # -- CORS --------------------------------------------------------------------------
    def cors(self, prefix: str, origins: str | Iterable[str] = "*", *, methods: str | Iterable[str] | None = None,
             headers: str | Iterable[str] | None = None, expose: str | Iterable[str] | None = None,
             max_age: int = 0, credentials: bool = False) -> None:
        """A CORS policy for the paths under ``prefix``; the engine answers preflights."""
        o, m, h, e = _csv(origins), _csv(methods), _csv(headers), _csv(expose)
        flags = CORS_CREDENTIALS if credentials else 0
        self._front_add(lambda p: check(_L.ember_server_cors(p, _z(prefix), _z(o), _z(m), _z(h), _z(e), max_age, flags),
                                        "ember_server_cors"))

    # -- request filtering -------------------------------------------------------------
    def allow_ip(self, rule: str) -> None:
        """Only clients on the allow list (addresses or CIDR networks) are served."""
        self._front_add(lambda p: check(_L.ember_server_filter_ip(p, _z(rule), True), "ember_server_filter_ip"))

    def deny_ip(self, rule: str) -> None:
        """Clients matching ``rule`` (an address or a CIDR network) get 403."""
        self._front_add(lambda p: check(_L.ember_server_filter_ip(p, _z(rule), False), "ember_server_filter_ip"))

    def allow_methods(self, methods: str | Iterable[str]) -> None:
        """Only these methods are served; others get 405."""
        m = _csv(methods)
        self._front_add(lambda p: check(_L.ember_server_filter_methods(p, _z(m)), "ember_server_filter_methods"))

    def deny_path(self, pattern: str) -> None:
        """Paths matching the glob ``pattern`` ("*.bak", "/admin/*") get 404."""
        self._front_add(lambda p: check(_L.ember_server_filter_path(p, _z(pattern)), "ember_server_filter_path"))

    def max_url_bytes(self, n: int) -> None:
        """Request targets longer than ``n`` bytes get 414 (0 = no limit)."""
        self._front_add(lambda p: check(_L.ember_server_filter_max_url(p, n), "ember_server_filter_max_url"))
