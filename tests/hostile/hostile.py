"""Hostile clients against a running reference app, and what is measured meanwhile.

Shared by the tests (tests/hostile/test_*.py, short) and the bench mode (bench/hostile.py,
longer, more connections). Every attack is a function `attack(port, seconds, scale)`
that runs for about `seconds` and returns an `Outcome`. While it runs, `Watch` samples the
server's RSS from /proc and a well-behaved client (`Probe`) measures the latency of
`GET /` on its own keep-alive connection.

HTTP/2 frames are written by hand (tests/conformance/rawh2.py's framing), so an attack can
do what no polite client library would: never read, never open a window, never end a
header block.
"""
import os
import socket
import struct
import threading
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
SETTINGS_HEADER_TABLE_SIZE, SETTINGS_INITIAL_WINDOW_SIZE = 0x1, 0x4
CANCEL = 0x8


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def hpack_str(b):
    """An HPACK string literal without Huffman coding, any length (RFC 7541 5.1, 5.2)."""
    return hpack_int(len(b), 7, 0x00) + b


def hpack_int(value, prefix_bits, first_byte_flags):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte_flags | value])
    out = [first_byte_flags | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(name, value):
    """Literal header field without indexing, new name (RFC 7541 6.2.2)."""
    return b"\x00" + hpack_str(name) + hpack_str(value)


def literal_indexed(name, value):
    """Literal header field with incremental indexing: enters the dynamic table (6.2.1)."""
    return b"\x40" + hpack_str(name) + hpack_str(value)


def request_block(method, path, extra=b""):
    return literal(b":method", method) + b"\x86" + literal(b":path", path) + literal(b":authority", b"t") + extra


def settings(**values):
    ids = {"header_table_size": 1, "enable_push": 2, "max_concurrent_streams": 3,
           "initial_window_size": 4, "max_frame_size": 5, "max_header_list_size": 6}
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", ids[k], v) for k, v in values.items()))


# ---- measuring ------------------------------------------------------------------------

def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_fds(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


def pct(values, p):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


class Probe(threading.Thread):
    """A well-behaved client: `GET /` on one keep-alive connection every `every` s,
    reconnecting when the server closes it (it may be closed as idle; that is not a
    failure). Records the latency of each answer and every failure."""

    def __init__(self, port, every=0.02, timeout=10.0):
        super().__init__(daemon=True)
        self.port, self.every, self.timeout = port, every, timeout
        self.latencies = []
        self.failures = []
        self.stopping = threading.Event()
        self.sock = None

    def _connect(self):
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _one(self):
        t0 = time.monotonic()
        if self.sock is None:
            self._connect()
        self.sock.sendall(b"GET / HTTP/1.1\r\nHost: probe\r\n\r\n")
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed before the answer")
            self.buf += chunk
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        while len(rest) < length:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed mid-answer")
            rest += chunk
        self.buf = rest[length:]
        if not head.startswith(b"HTTP/1.1 200"):
            raise ConnectionError("answer %r" % head[:40])
        if b"connection: close" in head.lower():
            self.sock.close()
            self.sock = None
        return time.monotonic() - t0

    def run(self):
        while not self.stopping.is_set():
            try:
                self.latencies.append(self._one())
            except (OSError, ConnectionError) as e:
                stale = self.sock is not None and not isinstance(e, socket.timeout)
                if self.sock is not None:
                    self.sock.close()
                    self.sock = None
                if stale:
                    # A kept-alive connection the server closed as idle: one retry on a
                    # fresh connection decides.
                    try:
                        self.latencies.append(self._one())
                        continue
                    except (OSError, ConnectionError) as e2:
                        e = e2
                        if self.sock is not None:
                            self.sock.close()
                            self.sock = None
                self.failures.append("%.1fs: %s" % (time.monotonic(), e))
            self.stopping.wait(self.every)
        if self.sock is not None:
            self.sock.close()

    def stop(self):
        self.stopping.set()
        self.join(self.timeout + 5)

    def summary(self):
        lat = self.latencies
        return {"answers": len(lat), "failures": len(self.failures),
                "p50_ms": round(pct(lat, 50) * 1000, 2) if lat else None,
                "p99_ms": round(pct(lat, 99) * 1000, 2) if lat else None,
                "max_ms": round(max(lat) * 1000, 2) if lat else None}


class Watch:
    """Around one attack: the server's RSS every 100 ms, its CPU time, and the probe."""

    def __init__(self, pid, port, probe_every=0.02):
        self.pid, self.port = pid, port
        self.samples = []
        self.stopping = threading.Event()
        self.probe = Probe(port, every=probe_every)
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self.stopping.is_set():
            kb, fds = rss_kb(self.pid), open_fds(self.pid)
            if kb is not None and fds is not None:
                self.samples.append((time.monotonic(), kb, fds))
            self.stopping.wait(0.1)

    def __enter__(self):
        self.baseline_kb = rss_kb(self.pid)
        self.baseline_fds = open_fds(self.pid)
        # The probe's latency with no attack, for comparison.
        calm = Probe(self.port)
        for _ in range(50):
            try:
                calm.latencies.append(calm._one())
            except (OSError, ConnectionError) as e:
                calm.failures.append(str(e))
        if calm.sock is not None:
            calm.sock.close()
        self.calm = calm.summary()
        self.cpu0, self.t0 = cpu_seconds(self.pid), time.monotonic()
        self.thread.start()
        self.probe.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.probe.stop()
        self.thread.join(2)
        self.seconds = time.monotonic() - self.t0
        try:
            self.cpu = cpu_seconds(self.pid) - self.cpu0
        except OSError:
            self.cpu = None

    def peak_kb(self):
        return max((kb for _, kb, _ in self.samples), default=self.baseline_kb)

    def last_kb(self):
        return self.samples[-1][1] if self.samples else self.baseline_kb

    def peak_fds(self):
        return max((n for _, _, n in self.samples), default=self.baseline_fds)

    def fds_back_after(self, since, slack=4):
        """Seconds from `since` (a time.monotonic()) until the server held no more than
        `slack` descriptors above its baseline again, after its peak; None if never."""
        peak_at = max(((t, n) for t, _, n in self.samples if t >= since), key=lambda x: x[1], default=(since, 0))[0]
        for t, _, n in self.samples:
            if t >= peak_at and n <= self.baseline_fds + slack:
                return round(t - since, 2)
        return None

    def report(self):
        return {"rss_baseline_mb": round(self.baseline_kb / 1024, 1),
                "rss_peak_mb": round(self.peak_kb() / 1024, 1),
                "rss_end_mb": round(self.last_kb() / 1024, 1),
                "fds_baseline": self.baseline_fds, "fds_peak": self.peak_fds(),
                "server_cpu_share": round(self.cpu / self.seconds, 2) if self.cpu is not None else None,
                "probe_calm": self.calm, "probe_attack": self.probe.summary(),
                "probe_failures": self.probe.failures[:5]}


class Outcome(dict):
    """What an attack saw: counters it chose, and `cut_off` (connections the server closed
    or told to go away) against `connections` (the attacker's)."""


# ---- an HTTP/2 attacker connection ----------------------------------------------------

class H2Attacker:
    """A raw HTTP/2 connection that reads in a background thread (when `read` is on) only
    to see whether and when the server cuts it off: GOAWAY, RST or EOF. With `read` off
    it never reads, like a peer that wants the server's output to pile up."""

    def __init__(self, port, read=True, initial_settings=b""):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Short, so that neither a blocked send nor the reader outlives the attack.
        self.sock.settimeout(0.5)
        self.t0 = time.monotonic()
        self.cut_at = None
        self.goaway = None
        self.blocked = False
        self.frames_in = {}
        self.bytes_in = 0
        # Connection window the server opened for us (WINDOW_UPDATE on stream 0).
        self.credit = 0
        self.closed = False
        self.reads = read
        self.send_lock = threading.Lock()
        self.send(PREFACE + (initial_settings or frame(SETTINGS, 0, 0)))
        if read:
            self.reader = threading.Thread(target=self._read, daemon=True)
            self.reader.start()

    def _read(self):
        buf = b""
        while not self.closed:
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self._cut()
                return
            self.bytes_in += len(chunk)
            buf += chunk
            # Walked by offset and cut once per read: a flood's answers (a million
            # 9-byte acks) must not be re-copied frame by frame, or this reader falls
            # seconds behind and sees the server's cut late.
            at = 0
            while len(buf) - at >= 9:
                n = int.from_bytes(buf[at:at + 3], "big")
                if len(buf) - at < 9 + n:
                    break
                ftype, flags = buf[at + 3], buf[at + 4]
                if ftype == SETTINGS and not flags & ACK:
                    # Acked, or the server keeps its protocol-default windows for us.
                    self.send(frame(SETTINGS, ACK, 0))
                self.frames_in[ftype] = self.frames_in.get(ftype, 0) + 1
                if ftype == WINDOW_UPDATE and n == 4 and int.from_bytes(buf[at + 5:at + 9], "big") == 0:
                    self.credit += int.from_bytes(buf[at + 9:at + 13], "big") & 0x7FFFFFFF
                if ftype == GOAWAY and self.goaway is None:
                    self.goaway = int.from_bytes(buf[at + 13:at + 17], "big") if n >= 8 else -1
                    self._cut()
                at += 9 + n
            buf = buf[at:]

    def _cut(self):
        if self.cut_at is None and not self.closed:
            self.cut_at = time.monotonic() - self.t0

    def send(self, data, deadline=None):
        """All of `data`, or False: the server cut the connection off, or (past
        `deadline`) it stopped reading (then `blocked` is set)."""
        with self.send_lock:
            return self._send(data, deadline)

    def _send(self, data, deadline):
        view = memoryview(data)
        while view:
            if self.cut_at is not None:
                return False
            try:
                n = self.sock.send(view)
            except socket.timeout:
                if deadline is None or time.monotonic() > deadline:
                    self.blocked = True
                    return False
                continue
            except OSError:
                self._cut()
                return False
            view = view[n:]
        return True

    def check_closed(self, seconds=1.0):
        """For an attacker that does not read: whether the server closed the connection
        (reads what is waiting, up to `seconds`, looking for EOF or a reset)."""
        end = time.monotonic() + seconds
        while self.cut_at is None and time.monotonic() < end:
            try:
                if not self.sock.recv(1 << 20):
                    self._cut()
            except socket.timeout:
                return False
            except OSError:
                self._cut()
        return self.cut_at is not None

    def close(self):
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


def wait_cut(attackers, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(a.cut_at is None for a in attackers):
        time.sleep(0.05)


def cut_summary(attackers):
    cut = [a for a in attackers if a.cut_at is not None]
    return {"connections": len(attackers), "cut_off": len(cut),
            "cut_after_s_max": round(max((a.cut_at for a in cut), default=0), 2),
            "goaway_codes": sorted({a.goaway for a in cut if a.goaway is not None})}
