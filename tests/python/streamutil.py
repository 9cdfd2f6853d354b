"""Small real-socket helpers for the streaming tests: clients that stall, leave, or read
a chunked answer by hand."""
import os
import socket
import time


def stalled_get(port, path, rcvbuf=4096):
    """Sends a GET and reads nothing: the answer backs up into the server's queue."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    return s


def reset_close(s):
    """Closes with a RST, as a client that vanishes does."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()


def read_head(s, timeout=10):
    s.settimeout(timeout)
    buf = b""
    while b"\r\n\r\n" not in buf:
        got = s.recv(65536)
        if not got:
            raise ConnectionError("closed before the head: %r" % buf)
        buf += got
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def read_all(s, timeout=10):
    s.settimeout(timeout)
    out = b""
    while True:
        got = s.recv(1 << 20)
        if not got:
            return out
        out += got


def dechunk(raw):
    """(body, complete): a chunked body; complete is False when the last chunk is missing."""
    body = b""
    while True:
        line, sep, raw = raw.partition(b"\r\n")
        if not sep:
            return body, False
        size = int(line.split(b";")[0], 16)
        if size == 0:
            return body, True
        if len(raw) < size + 2:
            return body + raw[:size], False
        body += raw[:size]
        raw = raw[size + 2:]


def rss_kib(pid=None):
    with open("/proc/%s/status" % (pid or "self")) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_for(pred, timeout=5.0, step=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def random_block(n):
    return os.urandom(n)
