"""A raw WebSocket (RFC 6455) client for checks a real client library refuses to make:
frames of any shape (unmasked, reserved bits and opcodes, fragmented control frames,
invalid UTF-8), sent whole, frame by frame or octet by octet. Written for this suite."""
import base64
import hashlib
import os
import socket
import struct
import time

CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def frame(opcode, payload=b"", fin=True, rsv=0, mask=True, length=None):
    """One frame's bytes. `length` overrides the encoded payload length (for lies)."""
    n = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | (rsv & 7) << 4 | opcode])
    mbit = 0x80 if mask else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + struct.pack(">H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack(">Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + masked(payload, key)


def masked(payload, key):
    """payload XOR the repeated 4-byte key (as one big integer: fast for 16 MiB)."""
    if not payload:
        return b""
    n = len(payload)
    stream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(stream, "little")).to_bytes(n, "little")


def close_payload(code, reason=b""):
    return struct.pack(">H", code) + reason


class Closed(Exception):
    """The TCP connection ended."""


class RawWs:
    def __init__(self, port, path="/ws", timeout=5.0, extra_headers=(), rcvbuf=None):
        self.sock = socket.socket()
        if rcvbuf:   # before connecting, so the TCP window starts small
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        key = base64.b64encode(os.urandom(16))
        lines = [b"GET %s HTTP/1.1" % path.encode(), b"Host: 127.0.0.1:%d" % port,
                 b"Upgrade: websocket", b"Connection: Upgrade",
                 b"Sec-WebSocket-Key: " + key, b"Sec-WebSocket-Version: 13"]
        lines += [h.encode() if isinstance(h, str) else h for h in extra_headers]
        self.sock.sendall(b"\r\n".join(lines) + b"\r\n\r\n")
        head = self._read_until(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status + b" ":
            raise AssertionError("upgrade refused: %r" % head)
        want = base64.b64encode(hashlib.sha1(key + GUID).digest())
        headers = dict((n.strip().lower(), v.strip()) for n, _, v in
                       (line.partition(b":") for line in head.split(b"\r\n")[1:]))
        assert headers.get(b"sec-websocket-accept") == want, head
        self.head = head

    def _read_until(self, marker):
        while marker not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise Closed("closed before %r" % marker)
            self.buf += data
        head, self.buf = self.buf.split(marker, 1)
        return head

    def _read(self, n):
        while len(self.buf) < n:
            data = self.sock.recv(max(65536, n - len(self.buf)))
            if not data:
                raise Closed("closed with %d of %d bytes" % (len(self.buf), n))
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, data, chop=None):
        """Sends bytes whole, or in pieces of `chop` octets with a pause between."""
        if not chop:
            self.sock.sendall(data)
            return
        for i in range(0, len(data), chop):
            self.sock.sendall(data[i:i + chop])
            time.sleep(0.0005 if chop > 1 else 0)

    def send_frame(self, opcode, payload=b"", chop=None, **kw):
        self.send(frame(opcode, payload, **kw), chop)

    def recv_frame(self):
        """(fin, rsv, opcode, payload) of the next frame; server frames must be unmasked."""
        b0, b1 = self._read(2)
        assert not b1 & 0x80, "a server frame was masked"
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._read(8))[0]
        return bool(b0 & 0x80), (b0 >> 4) & 7, b0 & 0xF, self._read(n)

    def recv_message(self):
        """The next data message as (opcode, payload), answering nothing; control frames
        in between are returned as they come, as (opcode, payload) too."""
        parts, first = [], None
        while True:
            fin, rsv, op, payload = self.recv_frame()
            assert rsv == 0, "server set reserved bits"
            if op >= 0x8:
                return op, payload
            if first is None:
                first = op
            parts.append(payload)
            if fin:
                return first, b"".join(parts)

    def expect_close(self, codes, timeout=5.0):
        """Reads up to the server's close frame; asserts its code is one of `codes` and
        that the server then closes the TCP connection. Returns (code, reason). Data
        frames before it are ignored."""
        self.sock.settimeout(timeout)
        while True:
            try:
                fin, rsv, op, payload = self.recv_frame()
            except Closed:
                raise AssertionError("TCP closed without a close frame (expected %s)" % (codes,))
            if op == CLOSE:
                break
        code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1005
        reason = payload[2:]
        assert code in codes, "close code %d (%r), expected one of %s" % (code, reason, codes)
        reason.decode("utf-8")  # a close reason is UTF-8
        self.expect_eof(timeout)
        return code, reason

    def expect_eof(self, timeout=5.0):
        """The server closes the TCP connection (answering our close frame if needed)."""
        try:
            self.sock.sendall(frame(CLOSE, close_payload(1000)))
        except OSError:
            pass
        deadline = time.monotonic() + timeout
        self.sock.settimeout(timeout)
        while time.monotonic() < deadline:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return
            if not data:
                return
        raise AssertionError("the server kept the TCP connection open after the close")

    def nothing_within(self, seconds):
        """Asserts no frame arrives within `seconds`."""
        self.sock.settimeout(seconds)
        try:
            got = self.recv_frame()
        except socket.timeout:
            return
        finally:
            self.sock.settimeout(5.0)
        raise AssertionError("expected nothing, got %r" % (got,))

    def close(self):
        self.sock.close()
