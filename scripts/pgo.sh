#!/usr/bin/env bash
# Profile-guided build of the native library: the libember.so and libember.a that dist/, the
# wheel and the NuGet package ship (scripts/release.sh), and that bench/ measures.
#
#   scripts/pgo.sh         instrument, train, rebuild: target/pgo/lib/ (libember.so with its
#                          libember.so.0 link, libember.a), where `make install PGO=1`,
#                          scripts/release.sh and bench/ take the library from
#   scripts/pgo.sh setup   only install llvm-profdata (CI does this first, with the other apt
#                          installs, then builds in the background)
#
# A plain `cargo build --release` (target/release) is not profile-guided.
#
# Why: with the profile, LLVM inlines and lays out the request path the way it is really
# taken. Callgrind counts 20 % fewer instructions per request (C reference app: GET /
# 14,242 -> 11,438; output-cache hit 11,749 -> 9,464; README, Performance) from the same
# source and the same release profile.
#
# 1. The library built with -Cprofile-generate (target/pgo-gen, its own target directory:
#    RUSTFLAGS are part of cargo's fingerprint, so sharing target/release would rebuild it).
# 2. Training: the C reference app (inline, auto and pool dispatch), the Python reference app
#    and the ASGI server, and the .NET reference app when Mono and EmberRef.exe are there, each
#    under a second of wrk per path: the hello route, the output cache, a static file, a
#    JSON route, a POST body; then TLS, HTTP/2, a streamed answer and WebSocket on the C app.
#    Every host's crossing and every protocol is run, so that none is left out of the
#    profile as never taken (LLVM would compile it for size).
# 3. llvm-profdata merges the raw profiles; the library is built again with -Cprofile-use.
#
# The raw profile format follows rustc's LLVM (22 with Rust 1.95); Debian 12's llvm-19
# reads it. Another toolchain may need a newer llvm-profdata: the merge then fails with
# LLVM's message. Training and the second build run again only when the instrumented
# library changed since the last training (rustc lists the profile in its dep-info, so a
# new profile rebuilds every crate). A stale profile is still safe: LLVM drops the profile
# of a function whose control flow changed, and that function is optimised as usual.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode="${1:-build}"

profdata_tool() {
    local v
    for v in $(seq 30 -1 19); do
        command -v "llvm-profdata-$v" >/dev/null && { echo "llvm-profdata-$v"; return 0; }
    done
    return 1
}

setup() {
    profdata_tool >/dev/null && return 0
    export DEBIAN_FRONTEND=noninteractive
    local i
    for i in $(seq "${APT_TRIES:-30}"); do # another install may hold the dpkg lock
        if apt-get install -y -qq --no-install-recommends llvm-19 >/dev/null; then return 0; fi
        apt-get update -qq || true
        sleep 10
    done
    echo "pgo: could not install llvm-19 (llvm-profdata)" >&2
    return 1
}

if [[ "$mode" == setup ]]; then
    setup
    exit 0
fi
[[ "$mode" == build ]] || { echo "usage: scripts/pgo.sh [setup]" >&2; exit 2; }
setup
profdata="$(profdata_tool)"
host="$(rustc -vV | sed -n 's/^host: //p')"
gen="$root/target/pgo-gen"
raw="$gen/raw"
out="$root/target/pgo/$host/release"

echo "pgo: instrumented build (target/pgo-gen)"
CARGO_TARGET_DIR="$gen" RUSTFLAGS="-Cprofile-generate=$raw" cargo build --release --lib --target "$host" -j2
genlib="$gen/$host/release"

# The C reference app, linked against the instrumented library (its own copy: the one in
# samples/c is linked against target/release).
sources="$(make -s -C samples/c --eval='pgo-sources: ; @echo $(REF_SOURCES)' pgo-sources)"
(cd samples/c && cc -std=c99 -O2 -pthread -I"$root/include" -o "$gen/ember_ref" $sources \
    -L"$genlib" -Wl,-rpath,"$genlib" -lember -pthread)

prof="$root/target/pgo/ember.profdata"
if [[ -f "$prof" && -f "$out/libember.so" && "$prof" -nt "$genlib/libember.so" && "$out/libember.so" -nt "$prof" ]]; then
    echo "pgo: the instrumented library has not changed since the last training: $out is current"
    train=0
else
    train=1
fi

cat > "$gen/post.lua" <<'EOF'
wrk.method = "POST"
wrk.body = string.rep("x", 700)
wrk.headers["Content-Type"] = "text/plain"
EOF

port=""
app=""
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# start_app <command...>: in its own process group, on a free port (PORT in the words).
start_app() {
    port="$(free_port)"
    setsid "${@//PORT/$port}" >"$gen/train.log" 2>&1 &
    app=$!
    local i
    for i in $(seq 300); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && return 0
        kill -0 "$app" 2>/dev/null || break
        sleep 0.1
    done
    echo "pgo: training app did not start: $*" >&2
    tail -20 "$gen/train.log" >&2
    return 1
}
# The raw profile is written when the process exits normally: a graceful stop, then a wait.
stop_app() {
    kill -TERM -- "-$app" 2>/dev/null || true
    local i
    for i in $(seq 150); do kill -0 "$app" 2>/dev/null || return 0; sleep 0.1; done
    echo "pgo: training app did not stop; its profile is lost" >&2
    kill -KILL -- "-$app" 2>/dev/null || true
}
load() { # load <path> [wrk args...]
    local path="$1"
    shift
    wrk -t1 -c32 -d1s "$@" "http://127.0.0.1:$port$path" >/dev/null
}

train_and_build() {
    echo "pgo: training"
    rm -rf "$raw" && mkdir -p "$raw"
    for dispatch in inline auto pool; do
        EMBER_DISPATCH=$dispatch start_app "$gen/ember_ref" PORT
        load /
        load '/cached?ttl=3600'
        load /static/hello.txt
        load /users/42
        load /echo -s "$gen/post.lua"
        stop_app
    done
    # TLS (keep-alive and handshakes), HTTP/2, streamed answers and WebSocket frames on the
    # C app in the default dispatch: a few hundred of each, from Python's httpx and websockets
    # (tests/setup.sh installs them; curl 7.88 cannot reuse a prior-knowledge connection).
    # Never run, their code would count as cold and be compiled for size; run as often as
    # the hello route, it would count as hot and be inlined everywhere (on 2026-12-07 that
    # made the library 260 KB larger, with no TLS keep-alive gain measured).
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
        -keyout "$gen/key.pem" -out "$gen/cert.pem" 2>/dev/null
    local tls_port
    tls_port="$(free_port)"
    EMBER_TLS_CERT="$gen/cert.pem" EMBER_TLS_KEY="$gen/key.pem" EMBER_TLS_PORT=$tls_port start_app "$gen/ember_ref" PORT
    python3 - "$port" "$tls_port" <<'PY'
import asyncio
import sys

try:
    import httpx
    import websockets
except ImportError as e:
    print(f"pgo: no TLS, HTTP/2 or WebSocket training: {e}")
    sys.exit(0)

PORT, TLS_PORT = sys.argv[1], sys.argv[2]


def ok(answers, version):
    assert all(a.status_code == 200 and a.http_version == version for a in answers), answers


async def tls():
    async with httpx.AsyncClient(verify=False, base_url=f"https://127.0.0.1:{TLS_PORT}") as client:
        for _ in range(25):
            ok(await asyncio.gather(*(client.get("/") for _ in range(8))), "HTTP/1.1")
    for _ in range(20):  # a new connection each: full handshakes
        async with httpx.AsyncClient(verify=False) as client:
            ok([await client.get(f"https://127.0.0.1:{TLS_PORT}/cached?ttl=3600")], "HTTP/1.1")


async def h2():
    async with httpx.AsyncClient(http1=False, http2=True, base_url=f"http://127.0.0.1:{PORT}") as client:
        for _ in range(10):
            ok(await asyncio.gather(*(client.get("/") for _ in range(20))), "HTTP/2")


async def stream():
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{PORT}") as client:
        for _ in range(100):
            ok([await client.get("/stream?n=8&size=4096")], "HTTP/1.1")


async def echo():
    async with websockets.connect(f"ws://127.0.0.1:{PORT}/ws") as ws:
        for _ in range(300):
            await ws.send("x" * 64)
            await ws.recv()


async def main():
    await asyncio.gather(tls(), h2(), stream(), echo())

asyncio.run(main())
PY
    stop_app
    export EMBER_LIBRARY="$genlib/libember.so" PYTHONPATH="$root/bindings/python"
    start_app python3 samples/python/ember_ref.py PORT
    load /
    load /users/42
    load '/cached?ttl=3600'
    load /echo -s "$gen/post.lua"
    stop_app
    start_app python3 -m ember py_hello:asgi_app --app-dir bench/targets --interface asgi --port PORT --io-threads 1 --log-level warning
    load /
    stop_app
    if command -v mono >/dev/null && [[ -f samples/dotnet/EmberRef.exe ]]; then
        start_app mono samples/dotnet/EmberRef.exe PORT
        load /
        load /users/42
        load /echo -s "$gen/post.lua"
        stop_app
    else
        echo "pgo: Mono or samples/dotnet/EmberRef.exe missing: the .NET host is not trained"
    fi
    unset EMBER_LIBRARY PYTHONPATH
    ls "$raw"/*.profraw >/dev/null 2>&1 || { echo "pgo: no raw profile was written" >&2; exit 1; }
    mkdir -p "$root/target/pgo"
    "$profdata" merge -o "$prof" "$raw"/*.profraw

    echo "pgo: optimised build (target/pgo)"
    CARGO_TARGET_DIR="$root/target/pgo" RUSTFLAGS="-Cprofile-use=$prof" \
        cargo build --release --lib --target "$host" -j2
}
[[ $train -eq 0 ]] || train_and_build
# Copies, not cargo's hard links: cargo never touches this directory.
lib="$root/target/pgo/lib"
mkdir -p "$lib"
rm -f "$lib/libember.so" "$lib/libember.a"
cp "$out/libember.so" "$out/libember.a" "$lib/"
ln -sf libember.so "$lib/libember.so.0"
echo "pgo: $lib/libember.so ($(stat -c %s "$lib/libember.so") bytes)"
