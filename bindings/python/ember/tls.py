"""TLS listeners, the access log and the metrics (``Server`` gets them from ``TlsMixin``).

    app = ember.Server(access_log="access.log", metrics_path="/metrics")
    app.listen_tls(8443, tls=ember.TlsConfig("cert.pem", "key.pem"))
    app.start(8080)
    app.tls_ports          # [8443]
    app.reload_tls()       # renewed certificate files, e.g. on SIGHUP
    app.reopen_access_log()

Declared here rather than in ``_lib`` so that the binding's core declarations stay small.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, Structure, byref, c_char_p, c_int32, c_size_t, c_uint16, c_uint32
from typing import Any, Union

from . import _lib
from .errors import EmberError, check

ACCESS_LOG_OFF = 0
ACCESS_LOG_COMBINED = 1
ACCESS_LOG_JSON = 2
LOG_ACCESS = 5
ERR_BUFFER_TOO_SMALL = -11


class _TlsConfig(Structure):
    """Opaque ``ember_tls_config``."""


_cfg_p = POINTER(_TlsConfig)
_server_p = POINTER(_lib.Server)
_L = _lib.lib
for _name, _restype, _argtypes in (
    ("ember_tls_config_new", c_int32, [POINTER(_cfg_p)]),
    ("ember_tls_config_free", c_int32, [_cfg_p]),
    ("ember_tls_config_add_cert_files", c_int32, [_cfg_p, c_char_p, c_char_p, c_char_p]),
    ("ember_tls_config_add_cert_pem", c_int32, [_cfg_p, c_char_p, c_char_p, c_size_t, c_char_p, c_size_t]),
    ("ember_server_listen_tls", c_int32, [_server_p, c_char_p, c_uint32, _cfg_p]),
    ("ember_server_tls_reload", c_int32, [_server_p]),
    ("ember_server_tls_set", c_int32, [_server_p, c_size_t, _cfg_p]),
    ("ember_server_set_access_log", c_int32, [_server_p, c_int32, c_char_p]),
    ("ember_server_reopen_access_log", c_int32, [_server_p]),
    ("ember_server_set_metrics", c_int32, [_server_p, c_char_p]),
    ("ember_server_metrics", c_int32, [_server_p, c_char_p, c_size_t, POINTER(c_size_t)]),
):
    _fn = getattr(_L, _name)
    _fn.restype, _fn.argtypes = _restype, _argtypes

PemSource = Union[str, bytes, "os.PathLike[str]"]


class TlsConfig:
    """The certificates of a TLS listener.

    ``TlsConfig(cert, key)`` starts with a default certificate; ``add(cert, key,
    server_name="example.com")`` adds one chosen by SNI ("*.example.com" covers one level
    of subdomains). ``cert`` and ``key`` are paths (``str`` or path objects) to PEM files,
    or the PEM text itself as ``bytes``. Each certificate is checked when added: a file
    that cannot be read, holds no certificate or key, or a key that does not belong to its
    certificate raises ``EmberError`` naming the file. Files are read again by
    ``Server.reload_tls()``.
    """

    def __init__(self, cert: PemSource | None = None, key: PemSource | None = None) -> None:
        self._certs: list[tuple[str | None, PemSource, PemSource]] = []
        if cert is not None or key is not None:
            self.add(cert, key)

    def add(self, cert: PemSource | None, key: PemSource | None, server_name: str | None = None) -> "TlsConfig":
        if cert is None or key is None:
            raise ValueError("ember: a certificate needs both cert and key")
        entry = (server_name, cert, key)
        native = _native_config([entry])   # checks now, with the engine's message
        _L.ember_tls_config_free(native)
        self._certs.append(entry)
        return self

    def __len__(self) -> int:
        return len(self._certs)

    def _native(self) -> Any:
        """An ``ember_tls_config*`` the caller frees with ``ember_tls_config_free``."""
        if not self._certs:
            raise ValueError("ember: the TlsConfig has no certificate")
        return _native_config(self._certs)


def _native_config(certs: list) -> Any:
    ptr = _cfg_p()
    check(_L.ember_tls_config_new(byref(ptr)), "ember_tls_config_new")
    try:
        for name, cert, key in certs:
            sni = name.encode("utf-8") if name is not None else None
            if isinstance(cert, bytes) and isinstance(key, bytes):
                rc = _L.ember_tls_config_add_cert_pem(ptr, sni, cert, len(cert), key, len(key))
                check(rc, "ember_tls_config_add_cert_pem")
            elif isinstance(cert, bytes) or isinstance(key, bytes):
                raise TypeError("ember: cert and key are both paths or both PEM bytes")
            else:
                rc = _L.ember_tls_config_add_cert_files(ptr, sni, os.fsencode(cert), os.fsencode(key))
                check(rc, "ember_tls_config_add_cert_files")
    except BaseException:
        _L.ember_tls_config_free(ptr)
        raise
    return ptr


def pop_options(options: dict) -> dict:
    """Takes this module's keyword options out of ``Server(**options)``."""
    mine = {k: options.pop(k) for k in ("access_log", "access_log_format", "metrics_path") if k in options}
    fmt = mine.get("access_log_format", "combined")
    if fmt not in ("combined", "json"):
        raise ValueError("ember: access_log_format is 'combined' or 'json'")
    path = mine.get("metrics_path")
    if path is not None and not isinstance(path, str):
        raise TypeError("ember: metrics_path is a string such as '/metrics'")
    return mine


class TlsMixin:
    """TLS listeners, the access log and the metrics of a ``Server``.

    Options of ``Server(...)``:

    - ``access_log``: a file path (lines appended; reopened by ``reopen_access_log()``),
      or ``True`` to send each line to the ``logging`` logger ``"ember.access"`` (INFO).
      Off by default. ``access_log_format``: ``"combined"`` (Apache Combined Log Format)
      or ``"json"`` (one JSON object per line).
    - ``metrics_path``: e.g. ``"/metrics"``: the engine answers it with Prometheus text
      (``""``: only through ``metrics()``). Off by default.
    """

    _extras: dict
    _tls_listeners: list
    _tls_ports: list

    def listen_tls(self, port: int = 0, host: str = "127.0.0.1", tls: TlsConfig | None = None,
                   reuse_port: bool = False, proxy_protocol: bool = False) -> None:
        """Adds a TLS listener, opened by ``start()`` next to the plain one (HTTP/1.1 and
        HTTP/2 by ALPN). Before start; its port is then in ``tls_ports``.
        ``proxy_protocol``: the listener sits behind a balancer that sends a PROXY protocol
        header (v1 or v2, before the TLS handshake) naming the client, which becomes
        ``request.remote_addr``; connections without one are closed."""
        if not isinstance(tls, TlsConfig) or not len(tls):
            raise TypeError("ember: listen_tls needs tls=TlsConfig(cert, key)")
        if self.running:  # type: ignore[attr-defined]
            raise RuntimeError("ember: add listeners before start()")
        addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._tls_listeners.append((addr, tls, reuse_port, proxy_protocol))

    @property
    def tls_ports(self) -> list[int]:
        """The bound ports of the TLS listeners while running, in the order added."""
        return list(self._tls_ports) if self.running else []  # type: ignore[attr-defined]

    def reload_tls(self) -> None:
        """Reads every TLS listener's certificate files again, for new connections
        (open ones keep theirs). All or nothing; EmberError names a bad file."""
        self._call(lambda p: check(_L.ember_server_tls_reload(p), "ember_server_tls_reload"))

    def set_tls(self, tls: TlsConfig, index: int = 0) -> None:
        """Gives the ``index``-th TLS listener other certificates, for new connections."""
        def run(p: Any) -> None:
            native = tls._native()
            try:
                check(_L.ember_server_tls_set(p, 1 + index, native), "ember_server_tls_set")
            finally:
                _L.ember_tls_config_free(native)
        if not 0 <= index < len(self._tls_listeners):
            raise IndexError(f"ember: there is no TLS listener {index}")
        self._call(run)

    def reopen_access_log(self) -> None:
        """Closes the access log file and opens it again by its path (after logrotate
        moved it). No-op when the lines go to ``logging``."""
        self._call(lambda p: check(_L.ember_server_reopen_access_log(p), "ember_server_reopen_access_log"))

    def metrics(self) -> str:
        """The metrics in the Prometheus text format (``metrics_path`` must be set)."""
        def run(p: Any) -> str:
            need = c_size_t(0)
            size = 8192
            while True:
                buf = ctypes.create_string_buffer(size)
                rc = _L.ember_server_metrics(p, buf, size, byref(need))
                if rc != ERR_BUFFER_TOO_SMALL:
                    check(rc, "ember_server_metrics")
                    return buf.value.decode("utf-8")
                size = need.value + 1024
        return self._call(run)

    # -- called by Server --------------------------------------------------------------
    def _configure_extras(self, ptr: Any) -> None:
        access = self._extras.get("access_log")
        if access not in (None, False):
            fmt = ACCESS_LOG_JSON if self._extras.get("access_log_format") == "json" else ACCESS_LOG_COMBINED
            path = None if access is True else os.fsencode(access)
            check(_L.ember_server_set_access_log(ptr, fmt, path), "ember_server_set_access_log")
        metrics = self._extras.get("metrics_path")
        if metrics is not None:
            check(_L.ember_server_set_metrics(ptr, metrics.encode("utf-8")), "ember_server_set_metrics")
        for addr, tls, reuse_port, proxy_protocol in self._tls_listeners:
            flags = (_lib.LISTEN_REUSE_PORT if reuse_port else 0) | (_lib.LISTEN_PROXY_PROTOCOL if proxy_protocol else 0)
            native = tls._native()
            try:
                check(_L.ember_server_listen_tls(ptr, addr.encode("ascii"), flags, native), "ember_server_listen_tls")
            finally:
                _L.ember_tls_config_free(native)

    def _started_extras(self, ptr: Any) -> None:
        ports = []
        for i in range(len(self._tls_listeners)):
            out = c_uint16()
            check(_L.ember_server_port(ptr, 1 + i, byref(out)), "ember_server_port")
            ports.append(out.value)
        self._tls_ports = ports

    def _call(self, fn: Any) -> Any:
        native = self._native  # type: ignore[attr-defined]
        if native is None or not native.enter():
            raise RuntimeError("ember: server not running")
        try:
            return fn(native.ptr)
        finally:
            native.leave()


__all__ = ["TlsConfig", "TlsMixin", "EmberError"]
