"""A small raw-socket HTTP/1.x client for the tests that need byte-level control
(pipelining, malformed input, limits, timeouts). Written for this suite only."""
import socket
import time


class Response:
    def __init__(self, version, status, reason, header_list, body, raw_head):
        self.version = version          # "HTTP/1.1"
        self.status = status            # int
        self.reason = reason
        self.header_list = header_list  # [(name, value)] as received
        self.body = body                # bytes
        self.raw_head = raw_head

    def header(self, name, default=None):
        vals = [v for n, v in self.header_list if n.lower() == name.lower()]
        return ", ".join(vals) if vals else default

    def __repr__(self):
        return "<Response %s %d %r body=%d bytes>" % (self.version, self.status,
                                                      self.header_list, len(self.body))


class ProtocolError(Exception):
    pass


class RawConn:
    """One TCP connection to the app; reads are buffered so several responses can be parsed."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.buf = b""
        self.eof = False

    def local_port(self):
        return self.sock.getsockname()[1]

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.sendall(data)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fill(self, deadline):
        """Read more bytes into the buffer; returns False on EOF/reset."""
        if self.eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("timed out waiting for data")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def _read_until(self, marker, deadline):
        while marker not in self.buf:
            if not self._fill(deadline):
                raise ProtocolError("connection closed before %r; got %r" % (marker, self.buf[:200]))
        i = self.buf.index(marker) + len(marker)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def _read_exact(self, n, deadline):
        while len(self.buf) < n:
            if not self._fill(deadline):
                raise ProtocolError("connection closed after %d of %d body bytes" % (len(self.buf), n))
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_response(self, head_request=False, timeout=5.0):
        """Parse one response (an interim 1xx response is returned as is)."""
        deadline = time.monotonic() + timeout
        raw_head = self._read_until(b"\r\n\r\n", deadline)
        lines = raw_head[:-4].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ProtocolError("bad status line %r" % lines[0])
        version, status = parts[0], int(parts[1])
        reason = parts[2] if len(parts) > 2 else ""
        header_list = []
        for line in lines[1:]:
            name, _, value = line.partition(":")
            header_list.append((name.strip(), value.strip()))
        resp = Response(version, status, reason, header_list, b"", raw_head)
        if head_request or status < 200 or status in (204, 304):
            return resp
        te = (resp.header("transfer-encoding") or "").lower()
        cl = resp.header("content-length")
        if "chunked" in te:
            body = b""
            while True:
                size_line = self._read_until(b"\r\n", deadline)
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    self._read_until(b"\r\n", deadline)  # (no trailers expected)
                    break
                body += self._read_exact(size, deadline)
                self._read_exact(2, deadline)
            resp.body = body
        elif cl is not None:
            resp.body = self._read_exact(int(cl), deadline)
        else:
            while self._fill(deadline):
                pass
            resp.body, self.buf = self.buf, b""
        return resp

    def wait_closed(self, timeout):
        """Wait until the peer closes. Returns (closed, extra_bytes_received, seconds_waited)."""
        start = time.monotonic()
        deadline = start + timeout
        extra = self.buf
        self.buf = b""
        while True:
            try:
                if not self._fill(deadline):
                    return True, extra + self.buf, time.monotonic() - start
            except socket.timeout:
                return False, extra + self.buf, time.monotonic() - start
            extra += self.buf
            self.buf = b""


def request_bytes(method, path, headers=(), body=b"", version="HTTP/1.1", host=True):
    lines = ["%s %s %s" % (method, path, version)]
    if host:
        lines.append("Host: 127.0.0.1")
    lines.extend("%s: %s" % h for h in headers)
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body


def exchange(port, data, head_request=False, timeout=5.0):
    """Open a connection, send data, read one response, close."""
    with RawConn(port, timeout) as c:
        c.send(data)
        return c.read_response(head_request=head_request, timeout=timeout)
