#!/usr/bin/env bash
# Runs a Windows console program under Wine so the conformance suite can drive it like a
# native app: stdout/stderr pass through, the exit code comes back, and SIGTERM becomes
# Ctrl+C. Windows has no SIGTERM; Ctrl+C (CTRL_C_EVENT) is how a console program is asked
# to stop, and Wine delivers it for SIGINT. Without this, SIGTERM kills Wine outright.
#   tests/windows/wine_app.sh target/windows/x64/ember_ref.exe 0
set -u
wine="${WINE:-$(command -v wine64 || echo /usr/lib/wine/wine64)}"
"$wine" "$@" &
pid=$!
trap 'kill -INT "$pid" 2>/dev/null' TERM INT
while :; do
    wait "$pid"
    rc=$?
    # wait returns early (>128) when a trapped signal arrives; go on waiting for Wine.
    kill -0 "$pid" 2>/dev/null || exit "$rc"
done
