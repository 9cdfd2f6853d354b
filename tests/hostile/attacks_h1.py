"""HTTP/1 attacks. Each returns an Outcome (see hostile.py)."""
import errno
import selectors
import socket
import threading
import time

from hostile import Outcome, pct


def _connect_nb(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    err = s.connect_ex(("127.0.0.1", port))
    if err not in (0, errno.EINPROGRESS):
        s.close()
        raise OSError(err, "connect")
    return s


def slowloris(port, seconds, conns=5000, trickle_every=0.5):
    """Holds `conns` connections, each sending a request head one header line at a time
    (every `trickle_every` s), never finishing it. A connection the server closes is
    replaced while time is left. Returns how many the server cut and after how long."""
    sel = selectors.DefaultSelector()
    deadline = time.monotonic() + seconds
    state = {}        # sock -> [opened_at, next_send, got_bytes]
    cut_after = []
    answers = {}
    opened = 0
    failed_connects = 0
    peak_open = 0

    def open_one():
        nonlocal opened, failed_connects
        try:
            s = _connect_nb(port)
        except OSError:
            failed_connects += 1
            return
        now = time.monotonic()
        state[s] = [now, now, b"", False]
        sel.register(s, selectors.EVENT_READ)
        opened += 1

    # Open them in bursts, so the listen backlog (1024) is not overrun.
    while len(state) < conns and time.monotonic() < deadline:
        for _ in range(min(500, conns - len(state))):
            open_one()
        time.sleep(0.05)
        _pump(sel, state, cut_after, answers, trickle_every)
        peak_open = max(peak_open, len(state))
    while time.monotonic() < deadline:
        _pump(sel, state, cut_after, answers, trickle_every)
        peak_open = max(peak_open, len(state))
        # Replace what was cut, a burst at a time.
        for _ in range(min(500, conns - len(state))):
            if time.monotonic() > deadline - 2:
                break
            open_one()
    # Time for the last ones to be judged: the header timeout plus slack.
    end = time.monotonic() + 5
    while state and time.monotonic() < end:
        _pump(sel, state, cut_after, answers, trickle_every)
    uncut = len(state)
    for s in list(state):
        sel.unregister(s)
        s.close()
    return Outcome(connections=opened, cut_off=len(cut_after), uncut=uncut, failed_connects=failed_connects,
                   peak_open=peak_open,
                   cut_after_s_p50=round(pct(cut_after, 50), 2) if cut_after else None,
                   cut_after_s_max=round(max(cut_after), 2) if cut_after else None,
                   answers=answers)


def _pump(sel, state, cut_after, answers, trickle_every):
    """One round: sends the next header line where due, notes connections the server
    closed and what they were told (408, or nothing)."""
    now = time.monotonic()
    for key, _ in sel.select(timeout=0.01):
        s = key.fileobj
        try:
            data = s.recv(4096)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        st = state.get(s)
        if st is None:
            continue
        st[2] += data
        if not data:
            cut_after.append(now - st[0])
            what = st[2][:12].decode("latin-1") or "closed"
            answers[what] = answers.get(what, 0) + 1
            sel.unregister(s)
            s.close()
            del state[s]
    for s, st in list(state.items()):
        if st[1] <= now:
            line = b"GET / HTTP/1.1\r\nHost: t\r\n" if not st[3] else b"X-Slow: still-coming\r\n"
            try:
                s.send(line)
                st[3] = True
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                pass          # not connected yet, or reset: the select above decides
            st[1] = now + trickle_every


def slow_reader(port, seconds, conns=200, request=None, rcvbuf=4096):
    """`conns` clients each ask for a large answer (`request`: raw bytes) and never read
    it, for `seconds`. The server must cut them off once their answers stop draining (the
    idle timeout) and hold only a bounded amount meanwhile. A client that never reads
    cannot tell when it was cut (the server's FIN waits behind the unread answer in the
    kernel), so the cut is read from the server's descriptors (see Watch.fds_back_after)."""
    socks = []
    deadline = time.monotonic() + seconds
    for _ in range(conns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(10)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(request)
        except OSError:
            s.close()
            continue
        socks.append(s)
    while time.monotonic() < deadline:
        time.sleep(0.1)
    for s in socks:
        s.close()
    return Outcome(connections=len(socks))


def never_answered(port, h1_conns=2000, h2_conns=40, h2_streams=200, path=b"/slow?ms=600000", wait=60):
    """Requests whose handler never answers: `h1_conns` HTTP/1 connections with one each,
    and `h2_conns` HTTP/2 connections with `h2_streams` streams each. Every one must be
    answered 503 at the handler timeout. Returns the statuses and when they came."""
    from hostile import END_HEADERS, END_STREAM, HEADERS, H2Attacker, frame, request_block
    t0 = time.monotonic()
    statuses = {}
    times = []
    lock = threading.Lock()

    def note(status):
        with lock:
            statuses[status] = statuses.get(status, 0) + 1
            times.append(time.monotonic() - t0)

    sel = selectors.DefaultSelector()
    bufs = {}
    for _ in range(h1_conns):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: t\r\n\r\n")
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        bufs[s] = b""
    h2 = []
    block = request_block(b"GET", path)
    for _ in range(h2_conns):
        a = H2Attacker(port, read=False)
        a.send(b"".join(frame(HEADERS, END_HEADERS | END_STREAM, 1 + 2 * i, block) for i in range(h2_streams)))
        h2.append(a)
    sent_at = time.monotonic() - t0
    threads = [threading.Thread(target=_h2_statuses, args=(a, h2_streams, note, t0 + wait), daemon=True) for a in h2]
    for t in threads:
        t.start()
    end = t0 + wait
    while bufs and time.monotonic() < end:
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            try:
                data = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            bufs[s] += data
            if b"\r\n" in bufs[s] or not data:
                line = bufs[s].split(b"\r\n", 1)[0]
                note(int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else "closed")
                sel.unregister(s)
                s.close()
                del bufs[s]
    for t in threads:
        t.join(max(0.1, end - time.monotonic()))
    for s in bufs:
        s.close()
    for a in h2:
        a.close()
    return Outcome(requests=h1_conns + h2_conns * h2_streams, statuses={str(k): v for k, v in statuses.items()},
                   unanswered=h1_conns + h2_conns * h2_streams - sum(statuses.values()),
                   sent_in_s=round(sent_at, 2),
                   answered_after_s_min=round(min(times), 2) if times else None,
                   answered_after_s_max=round(max(times), 2) if times else None)


def _h2_statuses(a, streams, note, deadline):
    """Reads an HTTP/2 connection's answers: one status per stream (HEADERS; the :status
    is the first field, as h2 encodes it), until every stream ended or `deadline`."""
    import hpack      # the h2 package's HPACK codec: the server indexes repeated statuses
    from hostile import HEADERS, RST_STREAM, SETTINGS, ACK, frame
    decoder = hpack.Decoder()
    buf = b""
    seen = set()
    while len(seen) < streams and time.monotonic() < deadline:
        try:
            chunk = a.sock.recv(1 << 20)
        except socket.timeout:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            ftype, flags, sid = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
            payload = buf[9:9 + n]
            buf = buf[9 + n:]
            if ftype == SETTINGS and not flags & ACK:
                a.send(frame(SETTINGS, ACK, 0))
            elif ftype == HEADERS:
                # Every block goes through the decoder, to keep its table in step.
                fields = dict(decoder.decode(payload))
                if sid not in seen:
                    seen.add(sid)
                    status = fields.get(":status")
                    note(int(status) if status else None)
            elif ftype == RST_STREAM and sid not in seen:
                seen.add(sid)
                note("reset")


def header_bombs(port, seconds, conns=8):
    """Request heads built to exhaust memory or CPU, sent over and over on `conns`
    threads: too many headers, one enormous header, a head that never ends, a request
    line of a megabyte. Each must be refused (431, or 400/414) and its connection closed.
    Returns the statuses seen."""
    bombs = {
        "many_headers": b"GET / HTTP/1.1\r\nHost: t\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(5000)) + b"\r\n",
        "huge_header": b"GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + b"b" * (1 << 20) + b"\r\n\r\n",
        "endless_head": b"GET / HTTP/1.1\r\nHost: t\r\nX-A: " + b"a" * (4 << 20),
        "huge_target": b"GET /" + b"p" * (1 << 20) + b" HTTP/1.1\r\nHost: t\r\n\r\n",
    }
    deadline = time.monotonic() + seconds
    lock = threading.Lock()
    seen = {}

    def worker():
        while time.monotonic() < deadline:
            for name, bomb in bombs.items():
                status = _throw(port, bomb)
                with lock:
                    seen.setdefault(name, {})
                    seen[name][status] = seen[name].get(status, 0) + 1

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    return Outcome(statuses={k: {str(s): n for s, n in v.items()} for k, v in seen.items()})


def _throw(port, bomb):
    """Sends `bomb` (as far as the server takes it) and returns the status of the answer,
    or "closed" (closed without one) / "timeout" (the server neither answered nor closed)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        try:
            s.sendall(bomb)
        except OSError:
            pass      # the server answered and closed before taking it all: read its answer
        got = b""
        try:
            while b"\r\n" not in got:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        except socket.timeout:
            return "timeout"
        except OSError:
            pass
        if got.startswith(b"HTTP/1.1 "):
            return int(got.split()[1])
        return "closed"
    finally:
        s.close()
