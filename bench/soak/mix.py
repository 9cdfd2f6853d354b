"""The soak's request mix in Python (bench/soak/soak.py --client python): the reference for
bench/soak_client.rs (bench-soak), which sends the same mix about ten times faster. Used
where the Rust client is not built."""
import http.client
import json
import os
import random
import threading
import time

HELLO = b'{"code": 1, "msg": "Hello WebAPI"}'


def one(conn, rnd):
    """One request of the mix; returns (ok, description) after checking the answer."""
    kind = rnd.randrange(8)
    close = rnd.randrange(20) == 0
    headers = {"Connection": "close"} if close else {}
    if kind == 0:
        conn.request("GET", "/", headers=headers)
        want, check = 200, lambda b: b == HELLO
    elif kind == 1:
        uid = "u%d" % rnd.randrange(1000000)
        conn.request("GET", "/users/" + uid, headers=headers)
        want, check = 200, lambda b: json.loads(b) == {"id": uid}
    elif kind == 2:
        body = os.urandom(rnd.choice([0, 1, 100, 4096, 65536]))
        conn.request("POST", "/echo", body=body, headers=dict(headers, **{"Content-Type": "application/x-soak"}))
        want, check = 200, lambda b: b == body
    elif kind == 3:
        conn.request("GET", "/inspect?x=%d" % rnd.randrange(100), headers=headers)
        want, check = 200, lambda b: json.loads(b)["path"] == "/inspect"
    elif kind == 4:
        conn.request("GET", "/fail", headers=headers)
        want, check = 500, lambda b: True
    elif kind == 5:
        conn.request("GET", "/slow?ms=5", headers=headers)
        want, check = 200, lambda b: json.loads(b) == {"slept_ms": 5}
    elif kind == 6:
        conn.request("GET", "/no/such/path", headers=headers)
        want, check = 404, lambda b: True
    else:
        # Declared over the limit and not sent: the engine answers 413 from the head
        # (a client still writing the body would race the close: EPIPE).
        conn.putrequest("POST", "/echo")
        conn.putheader("Content-Length", str(1048576 + 1))
        conn.endheaders()
        want, check = 413, lambda b: True
    r = conn.getresponse()
    body = r.read()
    ok = r.status == want and check(body)
    # 413 closes (the rest of the body is unread), and so do answers to Connection: close.
    return ok, (kind, r.status), close or kind == 7 or r.getheader("Connection", "").lower() == "close"


def client(port, stop, counts, errors, seed):
    """One client thread of a client process; counts[0] and errors are its process's."""
    rnd = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    used, last = 0, time.monotonic()
    while not stop.is_set():
        start = time.monotonic()
        try:
            ok, what, closed = one(conn, rnd)
        except (OSError, http.client.HTTPException, ValueError) as e:
            # How long the connection sat idle before this request tells a server that
            # dropped a request from the keep-alive race (idle timeout) on a stalled client.
            ok, closed = False, True
            what = "%r after %.1f s (request %d on its connection, idle %.1f s before it)" % (
                e, time.monotonic() - start, used + 1, start - last)
        counts[0] += 1
        used, last = used + 1, time.monotonic()
        if not ok:
            errors.append(what)
        if closed:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            used = 0
    conn.close()


def client_proc(port, clients, seed, slot, shared_counts, shared_errors, errq, done):
    """A client process: `clients` threads until `done` is set. Its count and error count
    go to its own slot of the shared arrays (one writer per slot, no lock); its first errors
    through errq at the end."""
    stop = threading.Event()
    counts, errors = [0], []
    threads = [threading.Thread(target=client, args=(port, stop, counts, errors, seed * 1000 + i), daemon=True)
               for i in range(clients)]
    for t in threads:
        t.start()
    while not done.wait(0.1):
        shared_counts[slot], shared_errors[slot] = counts[0], len(errors)
    stop.set()
    for t in threads:
        t.join(15)
    shared_counts[slot], shared_errors[slot] = counts[0], len(errors)
    for e in errors[:10]:
        errq.put(str(e))
