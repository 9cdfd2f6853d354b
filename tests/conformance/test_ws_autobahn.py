"""WebSocket protocol cases against GET /ws (echo), frame by frame with rawws.py.

The Autobahn testsuite itself (PyPI `autobahntestsuite`) runs on Python 2.7 only, so these are
our own cases, each named after the Autobahn case it mirrors (same number, same frames, same
expectation; octet-wise and frame-wise "chops" included). Expectations where Autobahn allows
"fail or drop" are strict here: a broken frame gets a close frame with 1002, invalid UTF-8 in
text 1007, a message over the app's limit (1 MiB) 1009, and then the server closes the TCP
connection. Cases 9.1.4-9.2.6 send 4-16 MiB, over the reference app's 1 MiB limit: 1009 where
Autobahn (with no limit) expects an echo."""
import struct
import time

import pytest

from rawws import BINARY, CLOSE, CONT, PING, PONG, TEXT, RawWs, close_payload, frame

NORMAL = (1000,)
PROTOCOL = (1002,)
INVALID_DATA = (1007,)
TOO_BIG = (1009,)
OCTETS = 1      # "octet-wise chops"
FRAMES = "f"    # "frame-wise chops": each frame sent on its own


def clean_close(ws):
    ws.send_frame(CLOSE, close_payload(1000))
    ws.expect_close(NORMAL)


def send_frames(ws, frames, chop=None):
    if chop == FRAMES:
        for f in frames:
            ws.send(f)
            time.sleep(0.001)
    else:
        ws.send(b"".join(frames), chop)


def echo_then_fail(ws, echo, codes):
    """Autobahn's OK or NON-STRICT: the echo of the message sent before the bad frame may
    come (or the failure may overtake it), then the close frame with one of `codes`, and
    nothing else: no pong for a ping sent after the bad frame."""
    seen_echo = False
    while True:
        fin, rsv, op, payload = ws.recv_frame()
        if op == CLOSE:
            break
        assert (op, payload) == echo and not seen_echo, "unexpected frame %d %r before the close" % (op, payload[:60])
        seen_echo = True
    code = struct.unpack(">H", payload[:2])[0]
    assert code in codes, "close code %d %r, expected %s" % (code, payload[2:], codes)
    ws.expect_eof()


def expect(ws, *messages):
    for want in messages:
        got = ws.recv_message()
        assert got == want, "got %r, expected %r" % (got[:1] + (got[1][:60],), want[:1] + (want[1][:60],))


# ---- 1.x framing: echo of text and binary at the length encoding boundaries ----

SIZES = [("1", 0), ("2", 125), ("3", 126), ("4", 127), ("5", 128), ("6", 65535), ("7", 65536), ("8", 65536)]


@pytest.mark.parametrize("sub,size", SIZES, ids=["1.1.%s" % s for s, _ in SIZES])
def test_case_1_1_text_echo(app, sub, size):
    ws = RawWs(app.port)
    payload = b"*" * size
    ws.send_frame(TEXT, payload, chop=997 if sub == "8" else None)
    expect(ws, (TEXT, payload))
    clean_close(ws)


@pytest.mark.parametrize("sub,size", SIZES, ids=["1.2.%s" % s for s, _ in SIZES])
def test_case_1_2_binary_echo(app, sub, size):
    ws = RawWs(app.port)
    payload = b"\xfe" * size
    ws.send_frame(BINARY, payload, chop=997 if sub == "8" else None)
    expect(ws, (BINARY, payload))
    clean_close(ws)


# ---- 2.x pings and pongs ----

@pytest.mark.parametrize("payload,chop", [(b"", None), (b"Hello, world!", None), (b"\x00\xff\xfe\xfd\xfc\xfb\x00\xff", None),
                                          (b"\xfe" * 125, None), (b"\xfe" * 125, OCTETS)],
                         ids=["2.1", "2.2", "2.3", "2.4", "2.6"])
def test_case_2_ping_is_answered_with_its_payload(app, payload, chop):
    ws = RawWs(app.port)
    ws.send_frame(PING, payload, chop=chop)
    expect(ws, (PONG, payload))
    clean_close(ws)


def test_case_2_5_ping_over_125_octets_fails(app):
    ws = RawWs(app.port)
    ws.send_frame(PING, b"\xfe" * 126)
    ws.expect_close(PROTOCOL)


@pytest.mark.parametrize("payload", [b"", b"unsolicited pong payload"], ids=["2.7", "2.8"])
def test_case_2_unsolicited_pong_is_ignored(app, payload):
    ws = RawWs(app.port)
    ws.send_frame(PONG, payload)
    ws.nothing_within(0.3)
    clean_close(ws)


def test_case_2_9_pong_then_ping(app):
    ws = RawWs(app.port)
    ws.send_frame(PONG, b"unsolicited pong payload")
    ws.send_frame(PING, b"ping payload")
    expect(ws, (PONG, b"ping payload"))
    clean_close(ws)


@pytest.mark.parametrize("chop", [None, OCTETS], ids=["2.10", "2.11"])
def test_case_2_ten_pings(app, chop):
    ws = RawWs(app.port)
    payloads = [b"payload-%d" % i for i in range(10)]
    send_frames(ws, [frame(PING, p) for p in payloads], chop)
    expect(ws, *[(PONG, p) for p in payloads])
    clean_close(ws)


# ---- 3.x reserved bits ----

@pytest.mark.parametrize("rsv,opcode,first,chop", [
    (1, TEXT, False, None), (2, TEXT, True, None), (3, TEXT, True, FRAMES), (4, TEXT, True, OCTETS),
    (5, BINARY, False, None), (6, PING, False, None), (7, CLOSE, False, None)],
    ids=["3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7"])
def test_case_3_reserved_bits_fail(app, rsv, opcode, first, chop):
    ws = RawWs(app.port)
    frames = [frame(TEXT, b"Hello, world!")] if first else []
    payload = close_payload(1000) if opcode == CLOSE else b"Hello, world!" if opcode != BINARY else b"\x00\xff" * 4
    frames += [frame(opcode, payload, rsv=rsv), frame(PING)]
    send_frames(ws, frames, chop)
    echo_then_fail(ws, (TEXT, b"Hello, world!"), PROTOCOL)


# ---- 4.x reserved opcodes ----

@pytest.mark.parametrize("opcode,payload,first", [
    (3, b"", False), (4, b"reserved opcode payload", False), (5, b"", True), (6, b"reserved opcode payload", True),
    (7, b"reserved opcode payload", True)], ids=["4.1.1", "4.1.2", "4.1.3", "4.1.4", "4.1.5"])
def test_case_4_1_reserved_data_opcodes_fail(app, opcode, payload, first):
    check_reserved_opcode(app, opcode, payload, first)


@pytest.mark.parametrize("opcode,payload,first", [
    (11, b"", False), (12, b"reserved opcode payload", False), (13, b"", True), (14, b"reserved opcode payload", True),
    (15, b"reserved opcode payload", True)], ids=["4.2.1", "4.2.2", "4.2.3", "4.2.4", "4.2.5"])
def test_case_4_2_reserved_control_opcodes_fail(app, opcode, payload, first):
    check_reserved_opcode(app, opcode, payload, first)


def check_reserved_opcode(app, opcode, payload, first):
    ws = RawWs(app.port)
    frames = [frame(TEXT, b"Hello, world!")] if first else []
    ws.send(b"".join(frames + [frame(opcode, payload), frame(PING)]))
    echo_then_fail(ws, (TEXT, b"Hello, world!"), PROTOCOL)


# ---- 5.x fragmentation ----

@pytest.mark.parametrize("opcode", [PING, PONG], ids=["5.1", "5.2"])
def test_case_5_fragmented_control_frame_fails(app, opcode):
    ws = RawWs(app.port)
    ws.send(frame(opcode, b"fragment1", fin=False) + frame(CONT, b"fragment2"))
    ws.expect_close(PROTOCOL)


@pytest.mark.parametrize("chop", [None, FRAMES, OCTETS], ids=["5.3", "5.4", "5.5"])
def test_case_5_text_in_two_fragments(app, chop):
    ws = RawWs(app.port)
    send_frames(ws, [frame(TEXT, b"fragment1", fin=False), frame(CONT, b"fragment2")], chop)
    expect(ws, (TEXT, b"fragment1fragment2"))
    clean_close(ws)


@pytest.mark.parametrize("chop", [None, FRAMES, OCTETS], ids=["5.6", "5.7", "5.8"])
def test_case_5_ping_between_fragments_is_answered_first(app, chop):
    ws = RawWs(app.port)
    send_frames(ws, [frame(TEXT, b"fragment1", fin=False), frame(PING, b"ping payload"),
                     frame(CONT, b"fragment2")], chop)
    expect(ws, (PONG, b"ping payload"), (TEXT, b"fragment1fragment2"))
    clean_close(ws)


@pytest.mark.parametrize("fin,chop", [(True, None), (True, FRAMES), (True, OCTETS),
                                      (False, None), (False, FRAMES), (False, OCTETS)],
                         ids=["5.9", "5.10", "5.11", "5.12", "5.13", "5.14"])
def test_case_5_continuation_with_nothing_to_continue_fails(app, fin, chop):
    ws = RawWs(app.port)
    send_frames(ws, [frame(CONT, b"non-continuation payload", fin=fin), frame(TEXT, b"Hello, world!")], chop)
    ws.expect_close(PROTOCOL)


def test_case_5_15_stray_continuation_after_a_whole_message_fails(app):
    ws = RawWs(app.port)
    ws.send(frame(TEXT, b"fragment1", fin=False) + frame(CONT, b"fragment2") +
            frame(CONT, b"fragment3", fin=False) + frame(TEXT, b"fragment4"))
    echo_then_fail(ws, (TEXT, b"fragment1fragment2"), PROTOCOL)


@pytest.mark.parametrize("fin", [False, True], ids=["5.16", "5.17"])
def test_case_5_continuation_first_repeated_fails(app, fin):
    ws = RawWs(app.port)
    one = frame(CONT, b"fragment1", fin=fin) + frame(TEXT, b"fragment2", fin=False) + frame(CONT, b"fragment3")
    ws.send(one + one)
    ws.expect_close(PROTOCOL)


def test_case_5_18_two_text_opcodes_in_one_message_fails(app):
    ws = RawWs(app.port)
    ws.send(frame(TEXT, b"fragment1", fin=False) + frame(TEXT, b"fragment2"))
    ws.expect_close(PROTOCOL)


def test_case_5_19_pings_answered_while_a_message_is_still_open(app):
    # (Autobahn waits 1 s between the two halves; 0.3 s shows the same.)
    ws = RawWs(app.port)
    ws.send(frame(TEXT, b"fragment1", fin=False) + frame(CONT, b"fragment2", fin=False) + frame(PING, b"pongme 1!"))
    expect(ws, (PONG, b"pongme 1!"))   # answered before the message is complete
    time.sleep(0.3)
    ws.send(frame(CONT, b"fragment3", fin=False) + frame(CONT, b"fragment4", fin=False) +
            frame(PING, b"pongme 2!") + frame(CONT, b"fragment5"))
    expect(ws, (PONG, b"pongme 2!"), (TEXT, b"fragment1fragment2fragment3fragment4fragment5"))
    clean_close(ws)


# ---- 6.x UTF-8 handling ----

KOSME = "κόσμε".encode()   # ce ba e1 bd b9 cf 83 ce bc ce b5


@pytest.mark.parametrize("fragments", [[b""], [b"", b"", b""], [b"", b"middle", b""]], ids=["6.1.1", "6.1.2", "6.1.3"])
def test_case_6_1_empty_fragments(app, fragments):
    ws = RawWs(app.port)
    frames = [frame(TEXT if i == 0 else CONT, f, fin=i == len(fragments) - 1) for i, f in enumerate(fragments)]
    ws.send(b"".join(frames))
    expect(ws, (TEXT, b"".join(fragments)))
    clean_close(ws)


@pytest.mark.parametrize("payload,split", [("Hello-µ@ßöäüàá-UTF-8!!".encode(), None),
                                           ("Hello-µ@ßöäüàá-UTF-8!!".encode(), 7),
                                           ("Hello-µ@ßöäüàá-UTF-8!!".encode(), 1), (KOSME, 1)],
                         ids=["6.2.1", "6.2.2", "6.2.3", "6.2.4"])
def test_case_6_2_valid_utf8_in_fragments(app, payload, split):
    # 6.2.2 splits at a code point boundary (after "Hello-µ"); 6.2.3/6.2.4 in 1-octet frames
    ws = RawWs(app.port)
    pieces = [payload] if split is None else [payload[i:i + split] for i in range(0, len(payload), split)]
    if split == 7:
        pieces = [payload[:7], payload[7:]]
    ws.send(b"".join(frame(TEXT if i == 0 else CONT, p, fin=i == len(pieces) - 1) for i, p in enumerate(pieces)))
    expect(ws, (TEXT, payload))
    clean_close(ws)


BAD_KOSME = KOSME + b"\xed\xa0\x80" + b"edited"   # a surrogate in the middle


@pytest.mark.parametrize("octetwise", [False, True], ids=["6.3.1", "6.3.2"])
def test_case_6_3_invalid_utf8_text_fails_1007(app, octetwise):
    ws = RawWs(app.port)
    if octetwise:
        ws.send(b"".join(frame(TEXT if i == 0 else CONT, BAD_KOSME[i:i + 1], fin=i == len(BAD_KOSME) - 1)
                         for i in range(len(BAD_KOSME))))
    else:
        ws.send_frame(TEXT, BAD_KOSME)
    ws.expect_close(INVALID_DATA)


@pytest.mark.parametrize("second", [b"\xf4\x90\x80\x80", b"\xf4\x90"], ids=["6.4.1", "6.4.2"])
def test_case_6_4_invalid_utf8_in_the_middle_of_a_message_fails_1007(app, second):
    # The rest of the message never comes: the server must fail the connection on what it has.
    ws = RawWs(app.port)
    ws.send(frame(TEXT, KOSME, fin=False))
    ws.nothing_within(0.2)
    ws.send(frame(CONT, second, fin=False))
    ws.expect_close(INVALID_DATA)


# 6.5-6.23: the UTF-8 decoder test sequences (Markus Kuhn's UTF-8-test.txt sections), one
# text message each. Whether each is valid UTF-8 is decided by Python's strict decoder.
UTF8_GROUPS = [
    ("6.5", [b"hello\x24world", b"hello\xc2\xa2world", b"hello\xe2\x82\xacworld", b"hello\xf0\xa4\xad\xa2world", KOSME]),
    ("6.6", [KOSME[:i] for i in range(1, len(KOSME) + 1)]),
    ("6.7", [b"\x00", b"\xc2\x80", b"\xe0\xa0\x80", b"\xf0\x90\x80\x80"]),
    ("6.8", [b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80"]),
    ("6.9", [b"\x7f", b"\xdf\xbf", b"\xef\xbf\xbf", b"\xf4\x8f\xbf\xbf"]),
    ("6.10", [b"\xf7\xbf\xbf\xbf", b"\xfb\xbf\xbf\xbf\xbf", b"\xfd\xbf\xbf\xbf\xbf\xbf"]),
    ("6.11", [b"\xed\x9f\xbf", b"\xee\x80\x80", b"\xef\xbf\xbd", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80"]),
    ("6.12", [b"\x80", b"\xbf", b"\x80\xbf", b"\x80\xbf\x80", bytes(range(0x80, 0xbf))]),
    ("6.13", [b"".join(bytes([c, 0x20]) for c in range(lo, hi)) for lo, hi in
              ((0xc0, 0xdf), (0xe0, 0xef), (0xf0, 0xf7), (0xf8, 0xfb), (0xfc, 0xfd))]),
    ("6.14", [b"\xc0", b"\xe0\x80", b"\xf0\x80\x80", b"\xdf", b"\xef\xbf", b"\xf7\xbf\xbf"]),
    ("6.15", [b"\xc0\xe0\x80\xf0\x80\x80\xf8\x80\x80\x80\xdf\xef\xbf"]),
    ("6.16", [b"\xfe", b"\xff", b"\xfe\xfe\xff\xff"]),
    ("6.17", [b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf"]),
    ("6.18", [b"\xc1\xbf", b"\xe0\x9f\xbf", b"\xf0\x8f\xbf\xbf"]),
    ("6.19", [b"\xc0\x80", b"\xe0\x80\x80", b"\xf0\x80\x80\x80"]),
    ("6.20", [b"\xed\xa0\x80", b"\xed\xad\xbf", b"\xed\xae\x80", b"\xed\xbf\xbf"]),
    ("6.21", [b"\xed\xa0\x80\xed\xb0\x80", b"\xed\xaf\xbf\xed\xbf\xbf"]),
    ("6.22", [b"\xef\xbf\xbe", b"\xef\xbf\xbf", b"\xf0\x9f\xbf\xbe", b"\xf4\x8f\xbf\xbf"]),
    ("6.23", [b"\xef\xbf\xb9", b"\xef\xbf\xbc", b"\xef\xbf\xbd"]),
]
UTF8_CASES = [("%s.%d" % (g, j + 1), p) for g, ps in UTF8_GROUPS for j, p in enumerate(ps)]


def _valid(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@pytest.mark.parametrize("payload", [p for _, p in UTF8_CASES], ids=[c for c, _ in UTF8_CASES])
def test_case_6_utf8_sequences(app, payload):
    ws = RawWs(app.port)
    ws.send_frame(TEXT, payload)
    if _valid(payload):
        expect(ws, (TEXT, payload))
        clean_close(ws)
    else:
        ws.expect_close(INVALID_DATA)


# ---- 7.x closing ----

def test_case_7_1_1_message_then_close(app):
    ws = RawWs(app.port)
    ws.send(frame(TEXT, b"Hello World!") + frame(CLOSE, close_payload(1000)))
    expect(ws, (TEXT, b"Hello World!"))
    ws.expect_close(NORMAL)


@pytest.mark.parametrize("after", [frame(CLOSE, close_payload(1000)), frame(PING, b"after close"),
                                   frame(TEXT, b"after close")], ids=["7.1.2", "7.1.3", "7.1.4"])
def test_case_7_1_nothing_after_close_is_answered(app, after):
    ws = RawWs(app.port)
    ws.send(frame(CLOSE, close_payload(1000)) + after)
    fin, rsv, op, payload = ws.recv_frame()
    assert op == CLOSE and struct.unpack(">H", payload[:2])[0] == 1000
    ws.expect_eof()


def test_case_7_1_5_close_between_fragments(app):
    ws = RawWs(app.port)
    ws.send(frame(TEXT, b"fragment1", fin=False) + frame(CLOSE, close_payload(1000)) + frame(CONT, b"fragment2"))
    ws.expect_close(NORMAL)


@pytest.mark.parametrize("payload,codes", [
    (b"", (1000, 1005)),                               # 7.3.1: no code; answered without one or with 1000
    (b"\x03", PROTOCOL),                               # 7.3.2: a one-octet payload is malformed
    (close_payload(1000), NORMAL),                     # 7.3.3
    (close_payload(1000, b"Hello World!"), NORMAL),    # 7.3.4
    (close_payload(1000, b"*" * 123), NORMAL),         # 7.3.5: the longest reason
    (close_payload(1000, b"*" * 124), PROTOCOL),       # 7.3.6: 126 octets, too long for a control frame
    (close_payload(1000, b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80\x65\x64\x69\x74\x65\x64"),
     (1002, 1007)),                                    # 7.5.1: invalid UTF-8 reason
], ids=["7.3.1", "7.3.2", "7.3.3", "7.3.4", "7.3.5", "7.3.6", "7.5.1"])
def test_case_7_close_payloads(app, payload, codes):
    ws = RawWs(app.port)
    ws.send_frame(CLOSE, payload)
    ws.expect_close(codes)


VALID_CODES = [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999]
INVALID_CODES = [0, 999, 1004, 1005, 1006, 1016, 1100, 2000, 2999]


@pytest.mark.parametrize("code", VALID_CODES, ids=["7.7.%d" % (i + 1) for i in range(len(VALID_CODES))])
def test_case_7_7_valid_close_codes_are_echoed(app, code):
    ws = RawWs(app.port)
    ws.send_frame(CLOSE, close_payload(code))
    ws.expect_close((code, 1000))


@pytest.mark.parametrize("code", INVALID_CODES, ids=["7.9.%d" % (i + 1) for i in range(len(INVALID_CODES))])
def test_case_7_9_invalid_close_codes_fail(app, code):
    ws = RawWs(app.port)
    ws.send_frame(CLOSE, close_payload(code))
    ws.expect_close(PROTOCOL)


# ---- 9.x limits: whole messages of 64 KiB .. 16 MiB ----

LIMIT_SIZES = [("1", 64 << 10), ("2", 256 << 10), ("3", 1 << 20), ("4", 4 << 20), ("5", 8 << 20), ("6", 16 << 20)]


@pytest.mark.parametrize("kind", [TEXT, BINARY], ids=["text", "binary"])
@pytest.mark.parametrize("sub,size", LIMIT_SIZES, ids=[s for s, _ in LIMIT_SIZES])
def test_case_9_1_and_9_2_large_messages(app, kind, sub, size):
    # (ids: 9.1.N is text, 9.2.N binary)
    ws = RawWs(app.port, timeout=20)
    payload = b"*" * size if kind == TEXT else b"\xfe" * size
    ws.send_frame(kind, payload)   # sent whole, even when the server fails it part way
    if size <= 1 << 20:
        expect(ws, (kind, payload))
        clean_close(ws)
    else:
        ws.expect_close(TOO_BIG)


# ---- RFC 6455 rules Autobahn checks only implicitly ----

def test_rfc6455_5_1_unmasked_client_frame_fails(app):
    ws = RawWs(app.port)
    ws.send_frame(TEXT, b"not masked", mask=False)
    ws.expect_close(PROTOCOL)


def test_rfc6455_5_2_frame_announcing_more_than_the_limit_fails_before_its_payload(app):
    # The header alone announces 1 MiB + 1; the server need not wait for the payload.
    ws = RawWs(app.port)
    ws.send(frame(BINARY, b"", length=(1 << 20) + 1)[:14])
    ws.expect_close(TOO_BIG)


def test_a_slow_sender_of_an_oversize_frame_still_reads_the_close_frame(app):
    # 2 MiB sent over ~5 s in steady pieces: the server fails the message at its header
    # (1009) and keeps reading and dropping while the bytes keep coming, so this sender's
    # writes do not hit a reset (a fixed 2 s linger cut a slow 16 MiB sender under Wine).
    ws = RawWs(app.port, timeout=20)
    data = frame(BINARY, b"\x01" * (2 << 20))
    piece = len(data) // 25
    for i in range(0, len(data), piece):
        ws.sock.sendall(data[i:i + piece])
        time.sleep(0.2)
    ws.expect_close(TOO_BIG)


def test_rfc6455_close_after_a_failure_leaves_the_app_serving(app):
    for _ in range(3):
        ws = RawWs(app.port)
        ws.send_frame(TEXT, b"\xff")
        ws.expect_close(INVALID_DATA)
    ws = RawWs(app.port)
    ws.send_frame(TEXT, b"still here")
    expect(ws, (TEXT, b"still here"))
    clean_close(ws)
