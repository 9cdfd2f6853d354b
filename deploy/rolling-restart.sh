#!/bin/sh
# Restarts the fleet one process at a time (deploy/ember@.service): each one refuses new
# connections, finishes what it has, exits, starts again; the next one goes only once this
# one's health path answers 200. nginx sends the traffic to the others meanwhile.
# Usage: deploy/rolling-restart.sh [port ...]   (default 8081 8082 8083)
set -eu
[ $# -gt 0 ] || set -- 8081 8082 8083
for port in "$@"; do
    echo "restarting ember@$port"
    systemctl restart "ember@$port"
    tries=0
    until curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz"; do
        tries=$((tries + 1))
        if [ "$tries" -ge 600 ]; then
            echo "ember@$port is not healthy after 60 s; stopping the rollout" >&2
            exit 1
        fi
        sleep 0.1
    done
    echo "ember@$port healthy"
done
