"""Stop (which frees) under continuous load, counted on both sides (issue 12 item 7).

Eight raw-socket clients keep sending on keep-alive connections (reconnecting when one
closes) while the host calls ``stop()``. Each request ends as exactly one of: a complete
answer (status and all 32 KiB), a clean close before any byte of the answer came, or a
truncated answer; none of the last kind is allowed. Every handler call must have reached its
client whole, no handler may run once ``stop()`` returned, and the route's release callback
runs exactly once."""

import socket
import threading
import time

import pytest

import ember

BODY = b"p" * 32768
REQUEST = b"GET /load HTTP/1.1\r\nHost: t\r\n\r\n"


def _one(sock):
    """1 complete, 0 clean close before any byte, -1 truncated."""
    try:
        sock.sendall(REQUEST)
    except OSError:
        return 0
    got = b""
    want = None
    while True:
        try:
            chunk = sock.recv(65536)
        except OSError:
            chunk = b""
        if not chunk:
            return 0 if not got else -1
        got += chunk
        if want is None and b"\r\n\r\n" in got:
            head, _, _ = got.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                return -1
            length = [l for l in head.lower().split(b"\r\n") if l.startswith(b"content-length:")]
            if not length or int(length[0].split(b":")[1]) != len(BODY):
                return -1
            want = len(head) + 4 + len(BODY)
        if want is not None and len(got) >= want:
            return 1 if len(got) == want and got.endswith(BODY) else -1


@pytest.mark.parametrize("dispatch", ["pool", "inline"])
def test_stop_under_load_loses_no_answer_and_calls_nothing_after(dispatch):
    app = ember.Server(dispatch=dispatch)
    counts = {"calls": 0, "after": 0}
    stopped = threading.Event()
    lock = threading.Lock()

    @app.get("/load")
    def load(req):
        with lock:
            counts["calls"] += 1
            if stopped.is_set():
                counts["after"] += 1
        return ember.Response(BODY, content_type="application/octet-stream")

    port = app.start()
    native = app._native
    done = threading.Event()
    results = [[0, 0, 0] for _ in range(8)]  # complete, clean close, truncated

    def client(mine):
        sock = None
        while not done.is_set():
            if sock is None:
                try:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                except OSError:
                    time.sleep(0.002)  # stopped: refused
                    continue
            r = _one(sock)
            if r == 1:
                mine[0] += 1
                continue
            mine[1 if r == 0 else 2] += 1
            sock.close()
            sock = None
        if sock is not None:
            sock.close()

    threads = [threading.Thread(target=client, args=(results[i],)) for i in range(8)]
    for t in threads:
        t.start()
    while counts["calls"] < 500:
        time.sleep(0.01)
    app.stop(5.0)
    stopped.set()
    time.sleep(0.1)  # the clients keep trying meanwhile
    done.set()
    for t in threads:
        t.join(60)
    complete = sum(r[0] for r in results)
    clean = sum(r[1] for r in results)
    truncated = sum(r[2] for r in results)
    print(f"{dispatch}: {counts['calls']} calls, {complete} complete, {clean} clean closes, {truncated} truncated")
    assert truncated == 0
    assert counts["after"] == 0
    assert complete == counts["calls"], "an answer the handler gave did not reach its client whole"
    assert native.freed and native.released == 1 and native.table == [None, None]
