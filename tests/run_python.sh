#!/bin/sh
# Python binding: build the engine, run the binding tests, then the shared HTTP
# conformance suite against the Python reference app (pool and inline dispatch).
#   tests/run_python.sh            everything
#   tests/run_python.sh -k async   extra arguments go to the binding tests' pytest
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
PYTHON=${PYTHON:-python3}

cargo build --release

if ! "$PYTHON" -c "import pytest, requests" >/dev/null 2>&1; then
    "$PYTHON" -m pip install -q pytest requests
fi

# The tests import the binding from the checkout; the package itself finds
# target/release/libember.so, so nothing needs installing.
PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH

"$PYTHON" -m pytest "$root/tests/python" -q "$@"

if [ -x "$root/tests/run_conformance.sh" ] || [ -f "$root/tests/run_conformance.sh" ]; then
    for mode in pool inline; do
        echo "== conformance suite, Python reference app, dispatch=$mode"
        EMBER_DISPATCH=$mode sh "$root/tests/run_conformance.sh" "$PYTHON samples/python/ember_ref.py" -q
    done
else
    echo "tests/run_conformance.sh not found: conformance suite skipped"
fi
