#!/usr/bin/env python3
"""Regression test for issue 12 item 6 (the .NET reference app died of SIGSEGV in native code
under load): rebuilding beside a running app must not kill it.

The cause: samples/dotnet/build.sh (and the binding's and tests' build scripts) copied
libember.so and Ember.dll with `cp` over the files the running app had mapped, and mcs wrote
the new EmberRef.exe over the old one in place. The truncated file made the app's next page
fault in the library fail: Mono printed "Got a SIGSEGV while executing native code" and the
process died (within 2 copies out of 20 in the first reproduction). The scripts now put files
by rename (bindings/dotnet/put.sh), so a running program keeps its old files.

This test starts samples/dotnet/EmberRef.exe (inline dispatch, 8 I/O threads), keeps 6
clients busy, runs samples/dotnet/build.sh once and puts the engine and Ember.dll beside the
app 20 times, and checks: every request in that time got its right answer, the app is alive,
and it still stops cleanly on SIGTERM. Run by tests/run_dotnet.sh.
"""
import http.client
import os
import signal
import subprocess
import sys
import threading

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HELLO = b'{"code": 1, "msg": "Hello WebAPI"}'


def main():
    env = dict(os.environ, EMBER_DISPATCH="inline", EMBER_WORKERS="8")
    app = subprocess.Popen(["mono", "samples/dotnet/EmberRef.exe", "0"], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    output = []
    for raw in app.stdout:   # stderr comes here too: log lines may precede the port
        output.append(raw)
        line = raw.decode("utf-8", "replace").strip()
        if line.startswith("listening on http://127.0.0.1:"):
            break
    else:
        print("FAIL: app did not start:\n" + "".join(x.decode("utf-8", "replace") for x in output))
        return 1
    port = int(line.rsplit(":", 1)[1])
    threading.Thread(target=lambda: output.extend(app.stdout), daemon=True).start()

    stop = threading.Event()
    counts, errors = [0], []

    def client(n):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while not stop.is_set():
            path = "/" if n % 2 else "/users/u%d" % n
            try:
                conn.request("GET", path)
                r = conn.getresponse()
                body = r.read()
                want = HELLO if path == "/" else ('{"id": "u%d"}' % n).encode()
                if r.status != 200 or body != want:
                    errors.append((path, r.status, body[:80]))
            except (OSError, http.client.HTTPException) as e:
                errors.append((path, repr(e)))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            counts[0] += 1
        conn.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(6)]
    for t in threads:
        t.start()
    steps = []
    try:
        rc = subprocess.run(["samples/dotnet/build.sh"], cwd=ROOT, capture_output=True).returncode
        steps.append("samples/dotnet/build.sh exit %d" % rc)
        for _ in range(20):
            subprocess.run(["bindings/dotnet/put.sh", "samples/dotnet", "target/release/libember.so",
                            "bindings/dotnet/bin/Ember.dll"], cwd=ROOT, check=True)
            if app.poll() is not None:
                break
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    alive = app.poll() is None
    clean = False
    if alive:
        os.killpg(app.pid, signal.SIGTERM)
        try:
            clean = app.wait(30) == 0
        except subprocess.TimeoutExpired:
            os.killpg(app.pid, signal.SIGKILL)
    else:
        app.wait()
    print("requests %d, wrong answers %d, %s, app alive: %s (exit %s), stopped cleanly: %s"
          % (counts[0], len(errors), "; ".join(steps), alive, app.returncode, clean))
    if not alive or errors or not clean or counts[0] == 0:
        print("FAIL: first errors: %r" % errors[:5])
        sys.stdout.write("".join(x.decode("utf-8", "replace") for x in output[-40:]))
        return 1
    print("ok   rebuild beside a running .NET app")
    return 0


if __name__ == "__main__":
    sys.exit(main())
