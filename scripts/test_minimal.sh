#!/usr/bin/env bash
# The minimal library (HTTP/1.1 only: `cargo build --profile minimal --no-default-features`)
# really serves: the C reference app linked against it passes the conformance suite minus its
# HTTP/2, TLS, WebSocket and static-file files and the HTTP/2 cases of the other files, an HTTP/2
# prior-knowledge client is turned away, asking it for a TLS listener fails at start saying the
# build has no TLS, and its WebSocket routes and static mounts are refused with
# EMBER_ERR_UNSUPPORTED naming the feature (the app logs that and serves the rest; they get 404).
# Last line: "minimal: N passed, N failed".
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
pass=0
fail=0
# One header for every build: the minimal build's cbindgen run (build.rs) must write the same
# include/ember.h as the full build did, compiled-out features and all.
header_before="$(mktemp)"
cp include/ember.h "$header_before"
cargo build -j2 --profile minimal --no-default-features --lib --target-dir target/minimal
lib=target/minimal/minimal
if cmp -s "$header_before" include/ember.h; then
    echo "ok   include/ember.h is the same for the minimal build"; pass=$((pass + 1))
else
    echo "FAIL the minimal build wrote another include/ember.h:"; diff "$header_before" include/ember.h | head -20; fail=$((fail + 1))
fi
rm -f "$header_before"
cc -std=c99 -Wall -Wextra -Wpedantic -Werror -O2 -pthread -Iinclude -o "$lib/ember_ref" \
    samples/c/ember_ref.c samples/c/ref_slow.c samples/c/ref_fleet.c samples/c/ref_stream.c samples/c/ref_ws.c samples/c/ref_front.c samples/c/sha256.c \
    -L"$lib" -Wl,-rpath,"$root/$lib" -lember
if EMBER_DISPATCH=pool EMBER_COMPRESSION=none tests/run_conformance.sh "$lib/ember_ref" -- -q --ignore=tests/conformance/test_http2.py \
        --ignore=tests/conformance/test_tls.py --ignore=tests/conformance/test_websocket.py \
        --ignore=tests/conformance/test_ws_autobahn.py --ignore=tests/conformance/test_browser.py \
        --ignore=tests/conformance/test_static_files.py -k "not http2"; then
    echo "ok   conformance (HTTP/1.1) against the minimal library"; pass=$((pass + 1))
else
    echo "FAIL conformance against the minimal library"; fail=$((fail + 1))
fi
# HTTP/2 with prior knowledge is not built in: the connection is closed, no HTTP/2 answer.
log="$(mktemp)"
err="$(mktemp)"
"$lib/ember_ref" 0 >"$log" 2>"$err" &
pid=$!
port=""
for _ in $(seq 50); do
    port="$(sed -n 's#^listening on http://127.0.0.1:\([0-9]*\)$#\1#p' "$log")"
    [[ -n "$port" ]] && break
    sleep 0.1
done
h1="$(curl -s --max-time 5 "http://127.0.0.1:$port/users/1" || true)"
h2="$(curl -s --max-time 5 --http2-prior-knowledge -o /dev/null -w '%{http_version} %{http_code}' "http://127.0.0.1:$port/" || true)"
# No WebSocket and no static files: the routes were refused, so the paths are not found.
ws="$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
    -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' "http://127.0.0.1:$port/ws" || true)"
st="$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/static/index.html" || true)"
kill -TERM "$pid"; wait "$pid" || true
if [[ "$h1" == '{"id": "1"}' && "$h2" != "2 200" ]]; then
    echo "ok   HTTP/1.1 answered ($h1); HTTP/2 prior knowledge refused (curl: '$h2')"; pass=$((pass + 1))
else
    echo "FAIL h1='$h1' h2='$h2'"; fail=$((fail + 1))
fi
ws_said='WebSocket routes (left out of this build): EMBER_ERR_UNSUPPORTED: this library was built without the `ws` feature'
st_said='static files (left out of this build): EMBER_ERR_UNSUPPORTED: this library was built without the `static` feature'
if grep -qF "$ws_said" "$err" && grep -qF "$st_said" "$err" && [[ "$ws" == 404 && "$st" == 404 ]]; then
    echo "ok   WebSocket and static files refused with EMBER_ERR_UNSUPPORTED; /ws and /static/ get $ws, $st"; pass=$((pass + 1))
else
    echo "FAIL WebSocket/static on the minimal library: upgrade $ws, static $st; the app said: $(cat "$err")"; fail=$((fail + 1))
fi
rm -f "$log" "$err"
# No TLS in this build: the same functions exist and refuse, and the app says why.
tls_err="$(EMBER_TLS_CERT=cert.pem EMBER_TLS_KEY=key.pem "$lib/ember_ref" 0 2>&1 >/dev/null </dev/null || true)"
if [[ "$tls_err" == *'EMBER_ERR_UNSUPPORTED: this library was built without the `tls` feature'* ]]; then
    echo "ok   a TLS listener is refused: $(grep -m1 -F '`tls`' <<<"$tls_err")"; pass=$((pass + 1))
else
    echo "FAIL a TLS listener on the minimal library: '$tls_err'"; fail=$((fail + 1))
fi
echo "minimal: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
