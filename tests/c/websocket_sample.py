"""Runs samples/c/websocket (the narrated chat sample) and talks to it with the `websockets`
client: greeting, broadcast to everyone, binary, the Origin check, /quit, and SIGTERM closing
the rest with 1001. Usage: python3 websocket_sample.py <path to the built sample>.
Last line: "N passed, N failed" (tests/run_c.sh reads it)."""
import asyncio
import re
import signal
import subprocess
import sys

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL", what, flush=True)


async def main(port, proc):
    url = "ws://127.0.0.1:%d/chat" % port
    a = await connect(url, compression=None)
    check(await a.recv() == "welcome: 1 online", "first greeting")
    b = await connect(url, compression=None, origin="http://127.0.0.1:8000")
    check(await b.recv() == "welcome: 2 online", "second greeting (a local Origin is fine)")
    await a.send("hi all")
    check(await a.recv() == "hi all" and await b.recv() == "hi all", "broadcast reaches both, sender included")
    await b.send(b"\x00\x01")
    check(await a.recv() == b"\x00\x01" and await b.recv() == b"\x00\x01", "binary broadcast")
    try:
        await connect(url, origin="http://evil.example")
        check(False, "a foreign Origin was accepted")
    except InvalidStatus as e:
        check(e.response.status_code == 403, "a foreign Origin gets 403")
    await b.send("/quit")
    try:
        await b.recv()
        check(False, "/quit did not close")
    except ConnectionClosed:
        check(b.close_code == 1000 and b.close_reason == "bye", "/quit closes with 1000 bye")
    proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(a.recv(), 10)
        check(False, "no close on SIGTERM")
    except ConnectionClosed:
        check(a.close_code == 1001, "SIGTERM closes the rest with 1001 (got %r)" % a.close_code)


def run(binary):
    proc = subprocess.Popen([binary, "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.match(r"listening on http://127\.0\.0\.1:(\d+)$", line.strip())
    check(m is not None, "first line %r" % line)
    if m:
        asyncio.run(main(int(m.group(1)), proc))
    try:
        out, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        check(False, "the sample did not exit after SIGTERM")
    check(proc.returncode == 0, "exit code %r; stderr: %s" % (proc.returncode, err[-2000:]))
    check("closed 1000 bye" in out and "closed 1001" in out, "on_close printed the codes: %r" % out[-500:])
    check("message of 6 bytes to 2 clients" in out, "the broadcast count was printed")


if __name__ == "__main__":
    run(sys.argv[1])
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)
