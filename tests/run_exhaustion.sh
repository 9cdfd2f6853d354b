#!/bin/sh
# Resource exhaustion (issue 12 item 4): the reference app under `ulimit -n 256` with
# 1,000 clients. Default app: samples/c/ember_ref (built by run_c.sh / make -C samples/c).
#   tests/run_exhaustion.sh [app command] [-- pytest args]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
app="samples/c/ember_ref"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then app="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
cd "$root" || exit 2
EMBER_APP="$app" exec "${PYTHON:-python3}" -m pytest "$here/exhaustion" "$@"
