#!/usr/bin/env python3
"""Where the bytes of an unstripped libember.so go, from its symbol table (`nm -S -C`):
code and read-only data by crate, and by the cargo feature that brings them in. Used by
bench/sizes.sh (cargo-bloat refuses a crate that is also a staticlib and an rlib).

    bench/size_crates.py LIB [N]     the N largest crates (default 25) and the features

Generic code is counted where it was instantiated from (`core`, `alloc`), and unwind
tables and relocations are not symbols: a feature's real cost is a little more."""
import collections
import re
import subprocess
import sys

# A demangled name's crate: the first path segment, past `<`, `impl `, `&`, `dyn `.
CRATE = re.compile(r"^<?(?:impl )?<?&?(?:mut )?(?:dyn )?([A-Za-z_][A-Za-z0-9_]*)::")
RING_C = ("GFp_", "ring_core", "p256", "x25519", "aes_", "gcm_", "bn_", "ecp_", "fiat_",
          "poly1305", "ChaCha20", "LIMBS", "CRYPTO", "chacha20_poly1305_")
# libzstd's C functions (compiled by zstd-sys): its prefixes, static ones included.
ZSTD_C = ("ZSTD", "HUF_", "FSE_", "HIST_", "POOL_", "ZDICT", "ERR_", "COVER", "FASTCOVER", "BIT_", "XXH",
          "divsufsort", "divbwt")
FEATURES = {
    "tls": [r"^<?(?:impl )?<?&?(?:mut )?(ring|rustls|rustls_pki_types|webpki|tokio_rustls|untrusted)::",
            r"^(" + "|".join(RING_C) + ")", r"ember::tls::"],
    "http2": [r"^<?(?:impl )?<?&?(?:mut )?h2::", r"hyper::proto::h2::", r"hyper::server::conn::http2"],
    "ws": [r"^<?(?:impl )?<?&?(?:mut )?(tungstenite|tokio_tungstenite|sha1|data_encoding|rand|rand_core|chacha20|getrandom)::",
           r"ember::ws::"],
    "static": [r"ember::(static_files|static_serve|static_cache|file_body|mime_types)::"],
    # std's backtrace printer has a miniz_oxide of its own (about 10 KB, in every build).
    "gzip": [r"^<?(?:impl )?<?&?(?:mut )?(flate2|miniz_oxide|crc32fast|adler2)::", r"ember::compress::"],
    "brotli": [r"^<?(?:impl )?<?&?(?:mut )?(brotli|brotli_decompressor|alloc_no_stdlib|alloc_stdlib)::"],
    "zstd": [r"^<?(?:impl )?<?&?(?:mut )?(zstd|zstd_safe|zstd_sys)::", r"^(" + "|".join(ZSTD_C) + ")"],
}


def symbols(lib):
    out = subprocess.run(["nm", "-S", "-C", lib], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[2] in "tTrRdD":
            yield int(parts[1], 16), parts[3]


def main():
    lib = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    crates, features = collections.Counter(), collections.Counter()
    total = 0
    for size, name in symbols(lib):
        total += size
        m = CRATE.match(name)
        if m:
            crate = m.group(1)
        elif name.startswith(RING_C):
            crate = "ring (C, assembly)"
        elif name.startswith(ZSTD_C):
            crate = "zstd (C)"
        elif name.startswith("ember_"):
            crate = "ember (the C functions)"
        else:
            crate = "[C, libc, unnamed]"
        crates[crate] += size
        for f, pats in FEATURES.items():
            if any(re.search(p, name) for p in pats):
                features[f] += size
                break
    print(f"{'bytes':>10}  {'share':>6}  crate")
    for crate, size in crates.most_common(n):
        print(f"{size:>10,}  {100 * size / total:5.1f}%  {crate}")
    print(f"{total:>10,}  100.0%  all symbols")
    print()
    print(f"{'bytes':>10}  feature (its crates and the engine's modules for it)")
    for f in FEATURES:
        print(f"{features[f]:>10,}  {f}")


if __name__ == "__main__":
    main()
