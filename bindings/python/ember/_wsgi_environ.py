"""The request headers and peer of a WSGI environ (``ember.wsgi``), with what is
remembered between requests to build them cheaply."""

from __future__ import annotations

from ._wire import split_addr


def _environ_key(name: str) -> str | None:
    """The environ key of a request header; None for names with "_", which would be
    indistinguishable from "-" there (dropped, as gunicorn and nginx do)."""
    if "_" in name:
        return None
    key = name.upper().replace("-", "_")
    if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        return key
    return "HTTP_" + key


def _key(keys: dict, name: str) -> str | None:
    try:
        return keys[name]
    except KeyError:
        if len(keys) >= 1024:
            keys.clear()
        key = keys[name] = _environ_key(name)
        return key


def header_keys(known: dict, keys: dict, names: tuple) -> tuple | bool:
    """The environ keys of a request's header names, remembered; False when a name is
    dropped or two names share a key (their values are joined: ``add_headers``)."""
    ks = tuple([_key(keys, name) for name in names])
    if None in ks or len(set(ks)) != len(ks):
        ks = False
    if len(known) >= 256:
        known.clear()
    known[names] = ks
    return ks


def add_headers(environ: dict, keys: dict, parts: list) -> None:
    """The request headers into ``environ`` one by one: values of names that share a key
    joined (cookies with "; ", the rest with ","), names with "_" left out."""
    it = iter(parts[5:-1])
    for name, value in zip(it, it):
        key = _key(keys, name)
        if key is None:
            continue
        if key in environ:
            environ[key] += ("; " if key == "HTTP_COOKIE" else ",") + value
        else:
            environ[key] = value


def peer(peers: dict, peer: str) -> tuple[str, str]:
    """(REMOTE_ADDR, REMOTE_PORT) of the peer's address text, remembered (bounded)."""
    if len(peers) >= 4096:
        peers.clear()
    host_port = split_addr(peer) or ("", 0)
    addr = peers[peer] = (host_port[0], str(host_port[1]))
    return addr
