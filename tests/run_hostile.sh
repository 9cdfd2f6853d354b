#!/bin/sh
# Hostile clients (issue 12 item 3), scaled down: HTTP/2 rapid reset, CONTINUATION,
# PING/SETTINGS/empty-DATA floods, a window never opened, an HPACK bomb; HTTP/1 slowloris,
# a slow reader, header bombs; 2,000+ requests never answered by their handler.
# Default app: samples/c/ember_ref (built by run_c.sh / make -C samples/c).
#   tests/run_hostile.sh [app command] [-- pytest args]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
app="samples/c/ember_ref"
case "${1:-}" in ""|--|-*) ;; *) app="$1"; shift ;; esac
[ "${1:-}" = "--" ] && shift
PYTHON=${PYTHON:-python3}
# hpack (with h2) decodes the HTTP/2 answers' statuses.
"$PYTHON" -c "import pytest, hpack" >/dev/null 2>&1 || "$PYTHON" -m pip install -q pytest h2 || exit 2
cd "$root" || exit 2
EMBER_APP="$app" exec "$PYTHON" -m pytest "$here/hostile" "$@"
