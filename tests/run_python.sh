#!/bin/sh
# Python binding: build the engine, run the binding tests (the binding's own API, the ASGI
# and WSGI servers, the command line), the framework tests (FastAPI, Starlette, Flask,
# Django on Ember, compared with uvicorn and gunicorn), then the shared HTTP conformance
# suite against the Python reference app (auto and pool dispatch; its streaming files inline).
#   tests/run_python.sh            everything
#   tests/run_python.sh -k async   extra arguments go to the binding tests' pytest
#   EMBER_SKIP_FRAMEWORKS=1        skips the framework tests (and their venv)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
PYTHON=${PYTHON:-python3}

cargo build --release

# The streaming, SSE and WebSocket tests use httpx (with HTTP/2) and websockets clients.
# zstandard decodes the zstd answers of test_compression_zstd.py.
if ! "$PYTHON" -c "import pytest, requests, httpx, h2, websockets, zstandard" >/dev/null 2>&1; then
    "$PYTHON" -m pip install -q pytest requests "httpx[http2]" websockets zstandard
fi

# The tests import the binding from the checkout; the package itself finds
# target/release/libember.so, so nothing needs installing.
PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH

# The optional C extension ember._speedups (the per-request crossing in C): built in place
# so that the tests use it; test_crossing.py then insists on it. The binding tests run
# once with it and once on the ctypes path (EMBER_PY_SPEEDUPS=0), the fallback every
# Python without the extension takes. EMBER_NO_SPEEDUPS=1 skips building it.
if [ "${EMBER_NO_SPEEDUPS:-0}" != 1 ]; then
    (cd "$root/bindings/python" && "$PYTHON" setup.py -q build_ext --inplace >/dev/null 2>&1) || true
    EMBER_REQUIRE_SPEEDUPS=1
    export EMBER_REQUIRE_SPEEDUPS
fi

# Most of the binding tests' time is waiting on timeouts and sockets: their files run on 2
# pytest-xdist workers (131 s -> 66 s), a file whole on one worker in its order, each test
# with its own server as before. EMBER_PYTHON_JOBS=1 runs them in one process.
jobs=${EMBER_PYTHON_JOBS:-2}
parallel=""
if [ "$jobs" -gt 1 ]; then
    "$PYTHON" -c "import xdist" >/dev/null 2>&1 || "$PYTHON" -m pip install -q pytest-xdist
    parallel="-n $jobs --dist loadfile"
fi
# shellcheck disable=SC2086  # $parallel is several words on purpose
"$PYTHON" -m pytest $parallel "$root/tests/python" -q "$@"
# The crossing decides how a request reaches its handler and how the answer goes back
# (the request callback, respond, respond_answer); stream, socket, lifecycle and loading
# calls are the same ctypes calls either way. So the second pass is the files whose
# handlers answer through the crossing, not the whole suite again (CI time).
# EMBER_CTYPES_ALL=1 runs every file.
ctypes_files="test_crossing test_handlers test_bodies_and_unicode test_prepared_answer
  test_dispatch_auto test_async test_asgi_http test_asgi_server test_asgi_send_receive test_wsgi test_wsgi_fast_paths test_front
  test_body_stream test_stream_response test_sse"
if [ "${EMBER_CTYPES_ALL:-0}" = 1 ]; then
    ctypes_paths="$root/tests/python"
else
    ctypes_paths=$(for f in $ctypes_files; do printf '%s ' "$root/tests/python/$f.py"; done)
fi
echo "== binding tests again on the ctypes crossing (EMBER_PY_SPEEDUPS=0)"
# shellcheck disable=SC2086  # one path per word
EMBER_PY_SPEEDUPS=0 "$PYTHON" -m pytest $parallel $ctypes_paths -q "$@"

if [ "${EMBER_SKIP_FRAMEWORKS:-0}" != 1 ]; then
    # The frameworks and the servers they are compared with live in their own venv
    # (tests/.venv, rebuilt when tests/frameworks/requirements.txt changes). The binding
    # is pip-installed there, so its `ember` console script is what the tests start.
    venv="$root/tests/.venv"
    req="$root/tests/frameworks/requirements.txt"
    if ! cmp -s "$req" "$venv/.requirements" 2>/dev/null; then
        echo "== framework venv: $venv"
        rm -rf "$venv"
        if ! "$PYTHON" -m venv "$venv" 2>/dev/null; then
            echo "python3 -m venv failed: installing python3-venv"
            if [ "$(id -u)" = 0 ]; then apt-get install -y -qq python3-venv >/dev/null; \
            else sudo apt-get install -y -qq python3-venv >/dev/null; fi
            rm -rf "$venv"
            "$PYTHON" -m venv "$venv"
        fi
        "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
        cp "$req" "$venv/.requirements"
    fi
    "$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps "$root/bindings/python"
    echo "== framework tests: FastAPI, Starlette, Flask, Django on Ember vs uvicorn / gunicorn"
    env -u PYTHONPATH "$venv/bin/python" -m pytest "$root/tests/frameworks" -q -p no:cacheprovider
fi

if [ -x "$root/tests/run_conformance.sh" ] || [ -f "$root/tests/run_conformance.sh" ]; then
    # The whole suite in auto (the default) and pool dispatch; inline only changes where
    # handlers and stream events run, so its pass is the streaming/WebSocket files (CI time).
    for mode in auto pool; do
        echo "== conformance suite, Python reference app, dispatch=$mode"
        EMBER_DISPATCH=$mode sh "$root/tests/run_conformance.sh" "$PYTHON samples/python/ember_ref.py" -q
    done
    echo "== conformance suite (streaming, upload and WebSocket files), Python reference app, dispatch=inline"
    EMBER_DISPATCH=inline EMBER_CONFORMANCE_FILES=streaming \
        sh "$root/tests/run_conformance.sh" "$PYTHON samples/python/ember_ref.py" -q
else
    echo "tests/run_conformance.sh not found: conformance suite skipped"
fi
