#!/usr/bin/env bash
# Behind a load balancer, through real processes: SIGTERM on each host's reference app
# (drain, refuse, in-flight finished, exit 0: tests/fleet/test_signals.py), then the fleet
# smoke: nginx in front of the C, Python and .NET apps under load, a SIGKILL and a rolling
# restart, every answer counted (tests/fleet/fleet.py --size ci, about 60 s).
# Usage: tests/run_fleet.sh   (after cargo build --release; builds the samples it lacks)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || {
  echo "run_fleet: installing nginx"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
}
[ -x samples/c/ember_ref ] || make -C samples/c >/dev/null
[ -f samples/dotnet/EmberRef.exe ] || samples/dotnet/build.sh >/dev/null

echo "== SIGTERM on each host's reference app"
python3 -m pytest tests/fleet/test_signals.py -q -p no:cacheprovider
echo "== fleet smoke: nginx + C, Python, .NET reference apps"
python3 tests/fleet/fleet.py --size ci
