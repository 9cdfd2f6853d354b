#!/usr/bin/env bash
# .NET binding under Mono: installs mono-devel when the C# compiler is missing, builds the
# engine (cargo build --release), Ember.dll, the samples and the binding tests, runs the binding
# tests (last line "N passed, N failed"), a Hello smoke test, and the shared HTTP conformance
# suite against the .NET reference app with auto and pool dispatch (its streaming files inline).
# Usage: tests/run_dotnet.sh [test-name-filter]    Exit code non-zero if anything failed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
failed=()

if ! command -v mcs >/dev/null 2>&1 && ! command -v csc >/dev/null 2>&1; then
    echo "== installing mono-devel"
    export DEBIAN_FRONTEND=noninteractive
    if [[ $(id -u) -eq 0 ]]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -q || true
    $SUDO apt-get install -y -q mono-devel
fi

echo "== cargo build --release"
cargo build --release

echo "== bindings/dotnet: Ember.dll"
bindings/dotnet/build.sh
echo "== samples/dotnet"
samples/dotnet/build.sh
echo "== tests/dotnet"
tests/dotnet/build.sh

echo "== binding tests (mono)"
log="$(mktemp)"
set +e
timeout 600 mono --debug tests/dotnet/bin/EmberTests.exe "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
last="$(tail -n 1 "$log")"
rm -f "$log"
if [[ $rc -ne 0 || ! "$last" =~ ^[0-9]+\ passed,\ 0\ failed$ ]]; then
    failed+=("binding tests (exit $rc: $last)")
fi

echo "== Hello smoke test"
out="$(mktemp)"
sleep 30 | mono samples/dotnet/Hello.exe 0 >"$out" 2>&1 &
hello_pid=$!
port=""
for _ in $(seq 100); do
    port="$(sed -n 's#^listening on http://127.0.0.1:\([0-9]*\)$#\1#p' "$out")"
    [[ -n "$port" ]] && break
    sleep 0.1
done
reply="$(curl -s --max-time 5 "http://127.0.0.1:${port:-1}/" || true)"
kill "$hello_pid" 2>/dev/null || true
wait "$hello_pid" 2>/dev/null || true
rm -f "$out"
if [[ "$reply" == "Hello from Ember" ]]; then echo "ok   hello: $reply"; else failed+=("hello smoke test (got '$reply')"); fi

if [[ $# -eq 0 && -x tests/run_conformance.sh && -d tests/conformance ]]; then
    # The whole suite in auto (the default) and pool dispatch; inline only changes where
    # handlers and stream events run, so its pass is the streaming/WebSocket files (CI time).
    for mode in auto pool inline; do
        files=""
        [[ $mode == inline ]] && files=streaming
        echo "== conformance: .NET reference app under Mono ($mode dispatch${files:+, $files files})"
        if ! EMBER_DISPATCH=$mode EMBER_CONFORMANCE_FILES=$files tests/run_conformance.sh mono samples/dotnet/EmberRef.exe -- -q; then
            failed+=("conformance ($mode)")
        fi
    done
fi

if [[ ${#failed[@]} -ne 0 ]]; then
    echo
    echo ".NET: FAILED: ${failed[*]}"
    exit 1
fi
echo
echo ".NET: all passed"
