#!/bin/sh
# Run the HTTP conformance suite against one reference app.
#   tests/run_conformance.sh samples/c/ember_ref
#   tests/run_conformance.sh python3 samples/python/ember_ref.py
#   EMBER_DISPATCH=inline tests/run_conformance.sh samples/c/ember_ref -k limits
# pytest arguments follow the app command: with a '--' everything after it goes to pytest
# (tests/run_conformance.sh mono --debug samples/dotnet/EmberRef.exe -- -x -k http2);
# without one, the first argument starting with '-' begins the pytest arguments.
# The suite appends the port argument 0 itself. Exit code = pytest's.
# EMBER_CONFORMANCE_FILES="test_sse.py test_stream.py" runs only those files of tests/conformance;
# EMBER_CONFORMANCE_FILES=streaming names the streaming, upload and WebSocket files (issue 8),
# which the per-host runners use for their inline-dispatch pass.
# EMBER_CONFORMANCE_JOBS=N: pytest-xdist workers, each with its own app (default 2; 1 = serial).
set -u
if [ $# -lt 1 ]; then
    echo "usage: $0 <app command> [--] [pytest args...]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
PYTHON=${PYTHON:-python3}

has_sep=no
for a in "$@"; do [ "$a" = "--" ] && has_sep=yes; done
app=""
while [ $# -gt 0 ]; do
    case "$1" in
        --) shift; break ;;
        -*) [ $has_sep = no ] && break ;;
    esac
    app="${app:+$app }$1"
    shift
done
if [ -z "$app" ]; then
    echo "$0: no app command given" >&2
    exit 2
fi

# Clients of the streaming, WebSocket and TLS tests: websockets (>= 13 for its sync and asyncio
# clients; wss for TLS), httpx with h2 for HTTP/2 (also over ALPN), zstandard (zstd answers), and Debian's
# chromium for test_browser.py.
# pytest-xdist runs the files on EMBER_CONFORMANCE_JOBS workers (below).
if ! "$PYTHON" -c "import pytest, requests, httpx, h2, websockets, websockets.sync.client, zstandard, xdist" >/dev/null 2>&1; then
    "$PYTHON" -m pip install -q pytest pytest-xdist requests 'httpx[http2]' 'websockets>=13' zstandard || exit 2
fi
if ! command -v chromium >/dev/null 2>&1; then
    echo "$0: installing chromium (apt) for test_browser.py" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq chromium >/dev/null 2>&1 ||
        { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } ||
        echo "$0: could not install chromium: test_browser.py will fail" >&2
fi

cd "$root" || exit 2
targets="$here/conformance"
if [ "${EMBER_CONFORMANCE_FILES:-}" = streaming ]; then
    EMBER_CONFORMANCE_FILES="test_sse.py test_stream.py test_upload.py test_websocket.py test_ws_autobahn.py"
fi
if [ -n "${EMBER_CONFORMANCE_FILES:-}" ]; then
    targets=""
    for f in $EMBER_CONFORMANCE_FILES; do targets="$targets $here/conformance/$f"; done
fi
# Most of the suite's time is waiting (the timeout tests wait out the app's 3 s handler and
# 5 s idle timeouts), so its files run on 2 workers by default: 88 s -> 58 s for the C app.
# Each worker starts its own app (the `app` fixture is per session, and each worker is
# a session), and a file stays on one worker in its order (--dist loadfile).
# EMBER_CONFORMANCE_JOBS=1 runs it in one process, as the Wine and System.Web runs do.
jobs=${EMBER_CONFORMANCE_JOBS:-2}
parallel=""
if [ "$jobs" -gt 1 ]; then  # xdist is there: the import check above installed it
    parallel="-n $jobs --dist loadfile"
fi
# $targets and $parallel are split on purpose (paths of this checkout, no spaces in the
# file names).
# shellcheck disable=SC2086
EMBER_APP="$app" exec "$PYTHON" -m pytest $parallel $targets "$@"
