#!/bin/sh
# Run the HTTP conformance suite against one reference app.
#   tests/run_conformance.sh samples/c/ember_ref
#   tests/run_conformance.sh python3 samples/python/ember_ref.py
#   EMBER_DISPATCH=inline tests/run_conformance.sh samples/c/ember_ref -k limits
# Arguments after the app command that start with '-' go to pytest; use '--' to separate
# explicitly: tests/run_conformance.sh mono samples/dotnet/EmberRef.exe -- -x
# The suite appends the port argument 0 itself. Exit code = pytest's.
set -u
if [ $# -lt 1 ]; then
    echo "usage: $0 <app command> [--] [pytest args...]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
PYTHON=${PYTHON:-python3}

app=""
while [ $# -gt 0 ]; do
    case "$1" in
        --) shift; break ;;
        -*) break ;;
        *) app="${app:+$app }$1"; shift ;;
    esac
done

if ! "$PYTHON" -c "import pytest, requests" >/dev/null 2>&1; then
    "$PYTHON" -m pip install -q pytest requests || exit 2
fi

cd "$root" || exit 2
EMBER_APP="$app" exec "$PYTHON" -m pytest "$here/conformance" "$@"
