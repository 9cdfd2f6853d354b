"""A minimal raw HTTP/2 (h2c prior knowledge) client for checks curl cannot make: exact DATA
bytes on the wire, several streams at once. Request headers use HPACK literals (no Huffman,
no dynamic table); of a response header block only the leading :status is decoded."""
import socket
import struct
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7
END_STREAM, END_HEADERS = 0x1, 0x4
# HPACK static table indexes of ":status" values (RFC 7541 appendix A)
STATUS_INDEX = {0x88: 200, 0x89: 204, 0x8a: 206, 0x8b: 304, 0x8c: 400, 0x8d: 404, 0x8e: 500}
# HPACK Huffman codes of the digits (RFC 7541 appendix B), enough to decode any status
DIGIT_CODES = {"00000": "0", "00001": "1", "00010": "2", "011001": "3", "011010": "4",
               "011011": "5", "011100": "6", "011101": "7", "011110": "8", "011111": "9"}


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def literal(name, value):
    """Literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2)."""
    def s(b):
        assert len(b) < 127
        return bytes([len(b)]) + b
    return b"\x00" + s(name) + s(value)


class H2Conn:
    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        self.closed = False
        self.goaway = False
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0))

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def request(self, stream_id, method, path, headers=(), end_stream=True):
        block = literal(b":method", method.encode()) + b"\x86"   # :scheme http (index 6)
        block += literal(b":path", path.encode()) + literal(b":authority", b"127.0.0.1")
        for name, value in headers:
            block += literal(name.encode(), value.encode())
        flags = END_HEADERS | (END_STREAM if end_stream else 0)
        self.sock.sendall(frame(HEADERS, flags, stream_id, block))

    def _next_frame(self, deadline):
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout("no complete HTTP/2 frame in time")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.closed = True
                return None
            self.buf += chunk
        length = int.from_bytes(self.buf[:3], "big")
        ftype, flags = self.buf[3], self.buf[4]
        sid = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
        payload, self.buf = self.buf[9:9 + length], self.buf[9 + length:]
        if ftype == SETTINGS and not flags & 1:
            self.sock.sendall(frame(SETTINGS, 1, 0))            # ack the server's settings
        elif ftype == PING and not flags & 1:
            self.sock.sendall(frame(PING, 1, 0, payload))
        elif ftype == GOAWAY:
            self.goaway = True
        return ftype, flags, sid, payload

    def read_streams(self, stream_ids, timeout=5.0):
        """Frames per stream until every stream ended (END_STREAM or RST_STREAM)."""
        deadline = time.monotonic() + timeout
        frames = {sid: [] for sid in stream_ids}
        open_ids = set(stream_ids)
        while open_ids:
            f = self._next_frame(deadline)
            if f is None:
                break
            ftype, flags, sid, payload = f
            if sid in frames:
                frames[sid].append((ftype, flags, payload))
                if (ftype in (DATA, HEADERS) and flags & END_STREAM) or ftype == RST_STREAM:
                    open_ids.discard(sid)
        return frames

    def wait_closed(self, timeout):
        """Reads frames until the server closes the connection; returns (closed, seconds)."""
        start = time.monotonic()
        try:
            while self._next_frame(start + timeout) is not None:
                pass
        except socket.timeout:
            return False, time.monotonic() - start
        return True, time.monotonic() - start


def _decode_status(block):
    """The :status from the start of a server header block (h2 sends :status first)."""
    first = block[0]
    if first & 0x80:                                   # indexed field
        return STATUS_INDEX.get(first)
    if first & 0xC0 == 0x40:                           # literal, incremental indexing
        index = first & 0x3F
    elif first & 0xE0 in (0x00, 0x10):                 # literal without / never indexed
        index = first & 0x0F
    else:
        return None
    if not 8 <= index <= 14:                           # static entries 8..14 are :status
        return None
    huffman, length = block[1] & 0x80, block[1] & 0x7F
    raw = block[2:2 + length]
    if not huffman:
        return int(raw.decode("ascii"))
    bits = "".join(format(b, "08b") for b in raw)
    out, code = "", ""
    for bit in bits:
        code += bit
        if code in DIGIT_CODES:
            out += DIGIT_CODES[code]
            code = ""
    assert set(code) <= {"1"}, "not a Huffman-coded number"   # EOS padding is all ones
    return int(out)


def status_of(frames):
    """Status of a response from its first HEADERS frame (None if there is none)."""
    for ftype, _, payload in frames:
        if ftype == HEADERS:
            return _decode_status(payload) if payload else None
    return None


def body_of(frames):
    return b"".join(p for t, _, p in frames if t == DATA)
