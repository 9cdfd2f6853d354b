"""The ctypes declarations against include/ember.h, the ABI's source of truth."""
import ctypes
import os
import re
import struct

from conftest import ROOT

from ember import _lib

HEADER = os.path.join(ROOT, "include", "ember.h")


def _header_functions():
    text = open(HEADER, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    found = {}
    for m in re.finditer(r"^[a-z_][\w \*]*?\b(ember_\w+)\s*\(([^;{]*?)\)\s*;", text, re.M | re.S):
        params = " ".join(m.group(2).split())
        found[m.group(1)] = 0 if params in ("", "void") else params.count(",") + 1
    return found


def test_every_declared_function_exists_in_the_header_with_the_same_arity():
    header = _header_functions()
    assert "ember_request_respond" in header, "header parse failed"
    for name, (_restype, argtypes) in _lib._PROTOTYPES.items():
        assert name in header, name
        assert header[name] == len(argtypes), (name, header[name], len(argtypes))


def test_constants_match_the_header():
    text = open(HEADER, encoding="utf-8").read()
    defines = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define EMBER_(\w+) (-?\d+)\b", text)}
    for name, value in defines.items():
        if hasattr(_lib, name):
            assert getattr(_lib, name) == value, name
    assert _lib.lib.ember_abi_version() == defines["ABI_VERSION"]
    # The front's flags and codings (ember/_front.py), each coding of the header included.
    from ember import _front
    codings = [n for n in defines if n.startswith("COMPRESS_")]
    assert {"COMPRESS_GZIP", "COMPRESS_BR", "COMPRESS_ZSTD"} <= set(codings)
    for name in codings + [n for n in defines if n.startswith("STATIC_") and n != "STATIC_DEFAULT"]:
        assert getattr(_front, name) == defines[name], name


def test_request_info_layout_matches_the_c_struct():
    from ember.request import _INFO, _PAIR

    # ember_request_info: size_t + u64 + 6 views + 2 (ptr, count) + u32 + i64 + u32 + 2 views
    # (scheme, peer_addr), padded.
    p = ctypes.sizeof(ctypes.c_void_p)
    assert ctypes.sizeof(_lib.RequestInfo) == struct.calcsize("@NQPNPNPNPNPNPNPNPNIqIPNPN0q")
    assert _lib.RequestInfo.peer_len.offset == struct.calcsize("@NQPNPNPNPNPNPNPNPNIqIPNP")
    assert _lib.RequestInfo.flags.offset == _lib.RequestInfo.content_length.offset + 8
    # Request unpacks the whole struct but its trailing padding, content_length and flags
    # included (it reads them for streamed bodies).
    assert _INFO.size == _lib.RequestInfo.flags.offset + 4
    assert _PAIR.size == ctypes.sizeof(_lib.Header) == 4 * p
    assert _lib.RequestInfo.http_version.offset == struct.calcsize("@NQPNPNPNPNPNPNPNPN")


def test_the_adapters_view_of_the_info_struct_follows_the_ctypes_mirror():
    # ember._wire derives its struct format from _lib.RequestInfo, so a field added there
    # moves every index the ASGI/WSGI adapters read. Check each against a filled struct.
    from ember import _wire

    info = _lib.RequestInfo()
    for i, (name, _) in enumerate(_lib.RequestInfo._fields_):
        setattr(info, name, 1000 + i)
    f = _wire.INFO.unpack_from(bytes(info))
    for index, name in ((_wire.I_METHOD, "method_ptr"), (_wire.I_PATH, "path_ptr"), (_wire.I_QUERY, "query_ptr"),
                        (_wire.I_BODY, "body_ptr"), (_wire.I_REMOTE, "remote_ptr"), (_wire.I_HEADERS, "headers"),
                        (_wire.I_VERSION, "http_version")):
        assert f[index] == getattr(info, name), name
    assert f[_wire.I_METHOD + 1] == info.method_len and f[_wire.I_HEADERS + 1] == info.header_count
    assert _wire.PAIR.size == ctypes.sizeof(_lib.Header)
    assert f[_wire.I_PEER] == info.peer_ptr and f[_wire.I_PEER + 1] == info.peer_len


def test_a_picked_view_of_the_info_struct_reads_each_named_field():
    # The ASGI server unpacks only the fields it uses, the rest skipped as padding.
    from ember import _wire

    info = _lib.RequestInfo()
    for i, (name, _) in enumerate(_lib.RequestInfo._fields_):
        setattr(info, name, 1000 + i)
    names = ("flags", "method_ptr", "method_len", "peer_ptr", "peer_len", "content_length", "header_count")
    st, at = _wire.picked(*names)
    f = st.unpack_from(bytes(info))
    assert len(f) == len(names)
    for name in names:
        assert f[at[name]] == getattr(info, name), name
