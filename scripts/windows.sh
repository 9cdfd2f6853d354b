#!/usr/bin/env bash
# Windows build of Ember, cross-built here and tested under Wine.
#
#   scripts/windows.sh            build both DLLs and run every Windows test (CI does this)
#   scripts/windows.sh build      only build: target/windows/{x64,x86}/ (DLL, import library, .def)
#   scripts/windows.sh setup      only install what the build needs (Rust targets, mingw-w64): CI
#                                 does this first, then builds in the background during the tests
#
# Cargo builds into its own target directory (target/cross): a cross build also compiles
# host build scripts into <target-dir>/release, and sharing target/release would hold its
# lock against the native release build running beside it.
#
# Build: `cargo build --release --target x86_64-pc-windows-gnu` and `i686-pc-windows-gnu`
# with Debian's mingw-w64; the header is the same include/ember.h. Then, per architecture, the
# C tests (tests/c), hello.c and the C reference app are cross-compiled with mingw-w64
# (-Wall -Wextra -Wpedantic -Werror, C99 and C++11) against the import library.
#
# Test under Wine (Debian's wine64 + wine32, Wine 8.0):
#   x64: every C test program but test_ref_app (it forks and signals the app: POSIX only),
#        hello answered over HTTP with curl, and the whole HTTP conformance suite
#        (tests/conformance, pytest) against ember_ref.exe, pool dispatch (x64: inline too, the
#        streaming files).
#   x86: every C test program, hello, and the conformance suite in pool dispatch.
# Wine 8.0 lacks bcryptprimitives.dll (Windows 10's ProcessPrng, which Rust's std imports);
# a test-only stand-in (tests/windows/bcryptprimitives.c) sits beside the test programs and
# is never shipped. SIGTERM from the suite reaches the app as Ctrl+C (tests/windows/wine_app.sh).
# Last line: "windows: N passed, N failed".
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode="${1:-all}"

declare -A TRIPLE=([x64]=x86_64-pc-windows-gnu [x86]=i686-pc-windows-gnu)
declare -A CC_FOR=([x64]=x86_64-w64-mingw32 [x86]=i686-w64-mingw32)
pass=0
fail=0
failed=()
no_wine32=""
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); failed+=("$*"); }

# A mirror mid-sync fails one index file ("File has unexpected size") and apt-get update exits
# non-zero though the other indices came: retry a few times, then let apt_install try anyway
# (it updates again between its own tries).
apt_update() {
    local i
    for i in 1 2 3; do
        apt-get update -qq && return 0
        sleep 10
    done
    return 0
}

apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    local i
    for i in $(seq "${APT_TRIES:-30}"); do # another install may hold the dpkg lock: wait and retry
        if apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then return 0; fi
        apt-get update -qq || true
        sleep 10
    done
    return 1
}

setup() {
    local t
    for t in "${TRIPLE[@]}"; do
        grep -qx "$t" <<<"$(rustup target list --installed)" || rustup target add "$t"
    done
    command -v x86_64-w64-mingw32-gcc >/dev/null && command -v i686-w64-mingw32-gcc >/dev/null || apt_install mingw-w64
    [[ "$mode" == build || "$mode" == setup ]] && return 0
    if [[ ! -x /usr/lib/wine/wine64 ]]; then apt_install wine64 wine; fi
    if [[ ! -x /usr/lib/wine/wine ]] || ! dpkg -s wine32:i386 >/dev/null 2>&1; then
        dpkg --add-architecture i386
        apt_update
        # wine32 needs the i386 index of every suite the amd64 libraries came from: with
        # bookworm-security's i386 index stale on the mirror (seen 2026-12-05 for hours,
        # "File has unexpected size"), apt cannot resolve it at all. Then the x86 DLL is
        # still built and its C tests still compiled, but not run; the x64 tests must pass.
        if ! APT_TRIES=3 apt_install wine32:i386; then
            no_wine32="wine32:i386 could not be installed (apt failed; see above)"
            # Take i386 back out, so that the later stages' apt-get update does not fail on
            # the same stale index (nothing of i386 got installed).
            dpkg --remove-architecture i386 2>/dev/null || true
        fi
    fi
    command -v curl >/dev/null || apt_install curl
    python3 -c 'import pytest, requests' 2>/dev/null || python3 -m pip install -q pytest requests
}

build_arch() { # <x64|x86>
    local arch="$1" t="${TRIPLE[$1]}" cc="${CC_FOR[$1]}-gcc" cxx="${CC_FOR[$1]}-g++"
    local out="target/windows/$arch" rel="target/cross/${TRIPLE[$1]}/release"
    cargo build --release --target "$t" --target-dir target/cross -j2
    rm -rf "$out" && mkdir -p "$out/tests"
    cp "$rel/ember.dll" "$out/"
    cp "$rel/libember.dll.a" "$out/ember.dll.a"
    # A .def for MSVC users: lib /def:ember.def /machine:x64 /out:ember.lib
    { echo "LIBRARY ember.dll"; echo "EXPORTS";
      "${CC_FOR[$arch]}-objdump" -p "$rel/ember.dll" | sed -n '/\[Ordinal\/Name Pointer\] Table/,/^$/p' |
          sed -n 's/.*\] \(ember_[a-z0-9_]*\)$/    \1/p'; } > "$out/ember.def"
    local imp="$out/ember.dll.a" warn="-Wall -Wextra -Wpedantic -Werror" t_out="$out/tests"
    # -static: the programs carry libgcc and winpthreads, so only ember.dll travels with them.
    $cc -std=c99 $warn -O2 -Iinclude -o "$t_out/hello.exe" samples/c/hello.c "$imp" -static
    $cc -std=c99 $warn -O2 -Iinclude -o "$t_out/ember_ref.exe" samples/c/ember_ref.c samples/c/ref_slow.c samples/c/ref_fleet.c samples/c/ref_stream.c \
        samples/c/ref_ws.c samples/c/ref_front.c samples/c/sha256.c "$imp" -static -pthread
    $cc -std=c99 $warn -O1 -Iinclude -c -o "$t_out/harness.o" tests/c/harness.c
    local name
    for name in test_abi test_lifecycle test_requests test_dispatch test_races test_answer_edges test_lifetime_edges test_contract test_tls_observe test_prepared; do
        $cc -std=c99 $warn -O1 -Iinclude -o "$t_out/$name.exe" "tests/c/$name.c" "$t_out/harness.o" "$imp" \
            -lws2_32 -static -pthread
    done
    $cc -std=c99 $warn -Iinclude -o "$t_out/header_c99.exe" tests/c/header_c99.c "$imp" -static
    $cxx -std=c++11 $warn -Iinclude -o "$t_out/header_cxx.exe" tests/c/header_cxx.cpp "$imp" -static
    $cc -O2 -shared -Wl,--kill-at -o "$t_out/bcryptprimitives.dll" tests/windows/bcryptprimitives.c -lbcrypt
    cp "$out/ember.dll" "$t_out/"
    echo "built $out: $(stat -c %s "$out/ember.dll") bytes ember.dll"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

test_arch() { # <x64|x86> <conformance modes...>
    local arch="$1" dir="target/windows/$1/tests" wine name log rc last why
    shift
    if [[ "$arch" == x64 ]]; then wine=/usr/lib/wine/wine64; else wine=/usr/lib/wine/wine; fi
    for name in header_c99 header_cxx test_abi test_lifecycle test_requests test_dispatch test_races test_answer_edges test_lifetime_edges test_contract test_tls_observe test_prepared; do
        log="$(mktemp)"
        set +e
        (cd "$dir" && timeout --kill-after=10 600 "$wine" "./$name.exe") >"$log" 2>&1
        rc=$?
        # Wine itself sometimes loses its wineserver under many threads ("wine client
        # error"), or fails to start a program at all (exit 1, not a line written, where
        # every test prints its summary even when it fails): that says nothing of the test,
        # so such a run is tried once more, openly.
        why=""
        if [[ $rc -ne 0 ]] && grep -q "wine client error" "$log"; then
            why="lost its wineserver ($(grep -m1 'wine client error' "$log" | tr -d '\r'))"
        elif [[ $rc -ne 0 && ! -s "$log" ]]; then
            why="ran nothing (exit $rc, no output)"
        fi
        if [[ -n "$why" ]]; then
            echo "note $arch $name: Wine $why; running it again"
            /usr/lib/wine/wineserver -p 60 2>/dev/null || true
            (cd "$dir" && timeout --kill-after=10 600 "$wine" "./$name.exe") >"$log" 2>&1
            rc=$?
        fi
        set -e
        last="$(tail -n 1 "$log" | tr -d '\r')"
        if [[ $rc -eq 0 && "$last" =~ ^[0-9]+\ passed,\ 0\ failed$ ]]; then ok "$arch $name: $last"
        else bad "$arch $name (exit $rc: $last)"; tail -n 30 "$log"; fi
        rm -f "$log"
    done

    local port pid reply=""
    port="$(free_port)"
    (cd "$dir" && exec "$wine" ./hello.exe "$port") >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        reply="$(curl -s --max-time 2 "http://127.0.0.1:$port/" || true)"
        [[ -n "$reply" ]] && break
        sleep 0.2
    done
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [[ "$reply" == "Hello from Ember" ]] && ok "$arch hello.exe: $reply" || bad "$arch hello.exe answered '$reply'"

    local m
    for m in "$@"; do
        echo "== conformance suite: $arch ember_ref.exe under Wine, $m dispatch"
        # Wine's socket emulation stalls the app past a few hundred open connections (600
        # WebSockets: 197 echoed), so the 1,000-connection test opens 200 here.
        # One worker (EMBER_CONFORMANCE_JOBS=1): two Wine apps at once would share one
        # wineserver and its stalls.
        # Inline dispatch changes where handlers run, which matters to the streaming, upload
        # and WebSocket files; the rest of the suite is the same under either mode, so the
        # inline pass runs those files, as the Linux runners' inline passes do.
        local files=""
        [[ "$m" == inline ]] && files=streaming
        if EMBER_DISPATCH=$m WINE="$wine" EMBER_CONFORMANCE_WS_CONNECTIONS=200 EMBER_CONFORMANCE_JOBS=1 \
               EMBER_CONFORMANCE_FILES="$files" tests/run_conformance.sh "tests/windows/wine_app.sh $dir/ember_ref.exe" -- -q; then
            ok "$arch conformance ($m)"
        else
            bad "$arch conformance ($m)"
        fi
    done
}

setup
[[ "$mode" == setup ]] && exit 0
build_arch x64
build_arch x86
[[ "$mode" == build ]] && exit 0

# One Wine prefix for the run, kept under target/; a persistent wineserver spares each
# program start its boot.
export WINEPREFIX="$root/target/windows/wineprefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
if [[ ! -f "$WINEPREFIX/system.reg" ]]; then
    echo "== creating the Wine prefix"
    timeout 300 /usr/lib/wine/wine64 wineboot --init >/dev/null 2>&1 || true
    # wineboot returns while the processes it started still write the new prefix; a program
    # started then can exit 1 without a word (2026-12-06 rehearsal: header_c99, the first
    # test, and only that once in three fresh prefixes). Wait for them to finish.
    timeout 300 /usr/lib/wine/wineserver -w || true
fi
/usr/lib/wine/wineserver -p 60 || true
trap '/usr/lib/wine/wineserver -k 2>/dev/null || true' EXIT

test_arch x64 pool inline
if [[ -z "$no_wine32" ]]; then
    test_arch x86 pool
else
    echo "SKIP x86 under Wine: $no_wine32"
fi

echo
[[ ${#failed[@]} -eq 0 ]] || printf 'failed: %s\n' "${failed[@]}"
echo "windows: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
