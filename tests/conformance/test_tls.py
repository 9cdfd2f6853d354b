"""TLS: the app started with EMBER_TLS_CERT / EMBER_TLS_KEY also listens with TLS (its second
stdout line is `listening on https://127.0.0.1:PORT`). Clients: Python's ssl module, curl,
httpx (HTTP/2 over ALPN), openssl s_client, the websockets library, raw sockets. The
certificates come from a throwaway CA made here with the openssl command line. SIGHUP (C, Python,
.NET under Mono) reloads the certificate files and reopens the access log."""
import http.client
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
import uuid

import pytest

from appproc import App

HELLO = b'{"code": 1, "msg": "Hello WebAPI"}'
HTTPS_RE = r"^listening on https://127\.0\.0\.1:(\d+)\s*$"

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command is not installed")


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    """A CA and a certificate for localhost and 127.0.0.1 signed by it (EC P-256)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    d = tmp_path_factory.mktemp("pki")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Ember test CA", cwd=d)
    _openssl("req", *ec, "-keyout", "key.pem", "-out", "leaf.csr", "-subj", "/CN=localhost", cwd=d)
    (d / "ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    _openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "cert.pem", "-days", "2", "-extfile", "ext", cwd=d)
    return {"ca": str(d / "ca.pem"), "cert": str(d / "cert.pem"), "key": str(d / "key.pem")}


@pytest.fixture(scope="module")
def tls_app(app, pki, tmp_path_factory):
    """The app with a TLS listener and an access log file."""
    log = tmp_path_factory.mktemp("access") / "access.log"
    a = App(app.cmdline, env={"EMBER_TLS_CERT": pki["cert"], "EMBER_TLS_KEY": pki["key"],
                              "EMBER_ACCESS_LOG": str(log)})
    a.start()
    m = a.wait_line(HTTPS_RE)
    if not m:
        tail = a.output_tail()
        a.cleanup()
        pytest.fail("started with EMBER_TLS_CERT/EMBER_TLS_KEY, the app printed no line "
                    "'listening on https://127.0.0.1:PORT'\n%s" % tail, pytrace=False)
    a.tls_port = int(m.group(1))
    a.access_log = log
    yield a
    rc = a.stop(signal.SIGTERM)
    tail = a.output_tail()
    a.cleanup()
    assert rc == 0, "the TLS app ended with %r after SIGTERM\n%s" % (rc, tail)


def _ctx(pki):
    return ssl.create_default_context(cafile=pki["ca"])


def _https(tls_app, pki, host="localhost"):
    return http.client.HTTPSConnection(host, tls_app.tls_port, context=_ctx(pki), timeout=10)


def test_python_ssl_gets_answers_on_one_kept_alive_connection(tls_app, pki):
    c = _https(tls_app, pki)
    c.request("GET", "/")
    r = c.getresponse()
    assert (r.status, r.read()) == (200, HELLO)
    assert r.getheader("Content-Type") == "application/json"
    c.request("GET", "/users/t%C3%A4st")
    r = c.getresponse()
    assert (r.status, r.read()) == (200, '{"id": "täst"}'.encode())
    assert c.sock.version() in ("TLSv1.3", "TLSv1.2")
    assert c.sock.getpeercert()["subject"] == ((("commonName", "localhost"),),)
    c.close()


def test_echo_of_a_large_body_and_inspect_over_tls(tls_app, pki):
    body = os.urandom(900_000)
    c = _https(tls_app, pki, host="127.0.0.1")
    c.request("POST", "/echo", body=body, headers={"Content-Type": "application/x-probe"})
    r = c.getresponse()
    assert (r.status, r.getheader("Content-Type")) == (200, "application/x-probe")
    assert r.read() == body
    c.request("GET", "/inspect?over=tls", headers={"X-Probe": "yes"})
    r = c.getresponse()
    seen = __import__("json").loads(r.read())
    assert seen["query"] == "over=tls" and seen["headers"]["x-probe"] == "yes", seen
    assert seen["remote_addr"].startswith("127.0.0.1:")


def test_curl_speaks_http1_and_http2_by_alpn(tls_app, pki):
    url = "https://localhost:%d/" % tls_app.tls_port
    for flag, status in (("--http1.1", "HTTP/1.1 200"), ("--http2", "HTTP/2 200")):
        p = subprocess.run(["curl", "-sS", "--max-time", "10", flag, "--cacert", pki["ca"], "-D", "-", url],
                           capture_output=True, timeout=20)
        assert p.returncode == 0, p.stderr
        head, _, body = p.stdout.partition(b"\r\n\r\n")
        assert head.decode("latin-1").startswith(status), head
        assert body == HELLO


def test_httpx_gets_http2_over_alpn(tls_app, pki):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("h2")
    with httpx.Client(http2=True, verify=_ctx(pki), timeout=10) as c:
        for i in range(5):
            r = c.get("https://localhost:%d/users/%d" % (tls_app.tls_port, i))
            assert r.http_version == "HTTP/2"
            assert (r.status_code, r.content) == (200, b'{"id": "%d"}' % i)
        r = c.head("https://localhost:%d/" % tls_app.tls_port)
        assert r.status_code == 200 and r.content == b""


@needs_openssl
def test_openssl_s_client_negotiates_h2_and_verifies(tls_app, pki):
    p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % tls_app.tls_port, "-servername", "localhost",
                        "-alpn", "h2,http/1.1", "-CAfile", pki["ca"], "-verify_return_error"],
                       input=b"", capture_output=True, timeout=20)
    out = p.stdout.decode("latin-1")
    assert "ALPN protocol: h2" in out, out
    assert "Verify return code: 0 (ok)" in out, out
    # "New, TLSv1.3, Cipher is ..." comes right after the handshake; the session block with
    # "Protocol : TLSv1.3" only when a ticket arrived before s_client quit.
    assert re.search(r"New, TLSv1\.[23], Cipher is|Protocol\s*: TLSv1\.[23]", out), out


@needs_openssl
def test_an_old_protocol_gets_an_alert_and_others_are_undisturbed(tls_app, pki):
    keep = _https(tls_app, pki)
    keep.request("GET", "/")
    assert keep.getresponse().read() == HELLO
    p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % tls_app.tls_port, "-tls1_1",
                        "-cipher", "DEFAULT:@SECLEVEL=0"], input=b"", capture_output=True, timeout=20)
    out = (p.stdout + p.stderr).decode("latin-1")
    assert p.returncode != 0, out
    assert "SSL alert number" in out, "the server should refuse TLS 1.1 with an alert:\n" + out
    keep.request("GET", "/users/1")
    assert keep.getresponse().read() == b'{"id": "1"}'


def _read_until_closed(s, timeout):
    s.settimeout(timeout)
    got = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk


def test_garbage_and_plain_http_are_dropped_without_disturbing_others(tls_app, pki):
    keep = _https(tls_app, pki)
    keep.request("GET", "/")
    assert keep.getresponse().read() == HELLO
    for junk in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", os.urandom(5000), b"\x16\x03\x01\xff\xff" + b"\x00" * 100):
        with socket.create_connection(("127.0.0.1", tls_app.tls_port), timeout=10) as s:
            try:
                s.sendall(junk)
            except OSError:
                pass
            answer = _read_until_closed(s, 8)
        assert b"HTTP/" not in answer and b"Hello" not in answer, answer
    keep.request("GET", "/users/2")
    assert keep.getresponse().read() == b'{"id": "2"}'
    fresh = _https(tls_app, pki)
    fresh.request("GET", "/")
    assert fresh.getresponse().read() == HELLO


def test_a_handshake_that_never_completes_ends_at_the_header_timeout(tls_app):
    # The app's header timeout is 1000 ms, its idle timeout 5000 ms.
    with socket.create_connection(("127.0.0.1", tls_app.tls_port), timeout=10) as s:
        s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01")   # a ClientHello that stops after 8 bytes
        t0 = time.monotonic()
        assert _read_until_closed(s, 10) == b""
        took = time.monotonic() - t0
    assert took < 4.5, "closed after %.1f s: not by the header timeout" % took


def test_wss_echo(tls_app, pki):
    ws_sync = pytest.importorskip("websockets.sync.client")
    probe = http.client.HTTPConnection("127.0.0.1", tls_app.port, timeout=10)
    probe.request("GET", "/ws")
    if probe.getresponse().status == 404:
        pytest.skip("this app has no /ws route yet")
    with ws_sync.connect("wss://localhost:%d/ws" % tls_app.tls_port, ssl=_ctx(pki), open_timeout=10) as ws:
        ws.send("über TLS")
        assert ws.recv(timeout=10) == "über TLS"
        ws.send(b"\x00\xff" * 40000)
        assert ws.recv(timeout=10) == b"\x00\xff" * 40000


def _log_lines(path, needle, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            lines = [l for l in path.read_text().splitlines() if needle in l]
        except FileNotFoundError:
            lines = []
        if lines:
            return lines
        time.sleep(0.05)
    return []


def test_the_access_log_gets_a_combined_line_per_request(tls_app, pki):
    token = uuid.uuid4().hex
    c = _https(tls_app, pki)
    c.request("GET", "/users/" + token, headers={"User-Agent": "probe \"x\"", "Referer": "https://r/"})
    assert c.getresponse().status == 200
    lines = _log_lines(tls_app.access_log, token)
    assert len(lines) == 1, lines
    pattern = (r'^127\.0\.0\.1 - - \[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d \+0000\] '
               r'"GET /users/%s HTTP/1\.1" 200 \d+ "https://r/" "probe \\"x\\""$' % token)
    assert re.match(pattern, lines[0]), lines[0]
    r = subprocess.run(["curl", "-sS", "--http2", "--cacert", pki["ca"], "-o", "/dev/null",
                        "https://localhost:%d/nope-%s" % (tls_app.tls_port, token)], capture_output=True, timeout=20)
    assert r.returncode == 0, r.stderr
    lines = _log_lines(tls_app.access_log, "/nope-" + token)
    assert len(lines) == 1 and '"GET /nope-%s HTTP/2.0" 404 ' % token in lines[0], lines


def test_metrics_count_tls_handshakes(tls_app, pki):
    c = _https(tls_app, pki)
    c.request("GET", "/metrics")
    r = c.getresponse()
    text = r.read().decode()
    assert r.status == 200, text
    m = re.search(r"^ember_tls_handshakes_total (\d+)$", text, re.M)
    assert m and int(m.group(1)) >= 1, text


def test_a_certificate_that_cannot_be_read_stops_the_app_naming_the_file(app, pki, tmp_path):
    import shlex
    missing = str(tmp_path / "no-such-cert.pem")
    env = dict(os.environ, EMBER_TLS_CERT=missing, EMBER_TLS_KEY=pki["key"])
    p = subprocess.run(shlex.split(app.cmdline) + ["0"], env=env, capture_output=True, timeout=60,
                       cwd=os.path.join(os.path.dirname(__file__), "..", ".."), stdin=subprocess.DEVNULL)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert b"listening on" not in p.stdout
    assert missing.encode() in p.stderr, p.stderr[-2000:]


def _subject_cn(port, pki):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with _ctx(pki).wrap_socket(raw, server_hostname="localhost") as s:
            return dict(x[0] for x in s.getpeercert()["subject"])["commonName"]


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this system")
def test_sighup_reloads_the_certificate_and_reopens_the_access_log(app, pki, tmp_path):
    if "wine" in app.cmdline:
        pytest.skip("a Windows app under Wine gets no SIGHUP")
    # A second certificate from the same CA, told apart by its common name.
    ca_dir = os.path.dirname(pki["ca"])
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", *ec, "-keyout", "key2.pem", "-out", "leaf2.csr", "-subj", "/CN=renewed", cwd=tmp_path)
    (tmp_path / "ext2").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "leaf2.csr", "-CA", os.path.join(ca_dir, "ca.pem"), "-CAkey",
             os.path.join(ca_dir, "ca.key"), "-CAcreateserial", "-out", "cert2.pem", "-days", "2",
             "-extfile", "ext2", cwd=tmp_path)
    cert, key, log = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "access.log"
    shutil.copy(pki["cert"], cert)
    shutil.copy(pki["key"], key)
    a = App(app.cmdline, env={"EMBER_TLS_CERT": str(cert), "EMBER_TLS_KEY": str(key), "EMBER_ACCESS_LOG": str(log)})
    a.start()
    try:
        m = a.wait_line(HTTPS_RE)
        assert m, a.output_tail()
        port = int(m.group(1))
        assert _subject_cn(port, pki) == "localhost"
        kept = http.client.HTTPSConnection("localhost", port, context=_ctx(pki), timeout=10)
        kept.request("GET", "/users/before-hup")
        assert kept.getresponse().read() and _log_lines(log, "/users/before-hup")
        # What logrotate and a certificate renewal do, then the signal.
        os.rename(log, str(log) + ".1")
        shutil.copy(tmp_path / "cert2.pem", cert)
        shutil.copy(tmp_path / "key2.pem", key)
        a.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while _subject_cn(port, pki) != "renewed":
            assert time.monotonic() < deadline and a.alive(), "no new certificate after SIGHUP\n" + a.output_tail()
            time.sleep(0.1)
        # The connection opened before keeps working; its lines go to the new file.
        kept.request("GET", "/users/after-hup")
        assert kept.getresponse().status == 200
        kept.close()
        assert _log_lines(log, "/users/after-hup"), a.output_tail()
        assert "after-hup" not in (tmp_path / "access.log.1").read_text()
        assert a.alive()
    finally:
        rc = a.stop(signal.SIGTERM)
        tail = a.output_tail()
        a.cleanup()
    assert rc == 0, tail


def test_answers_the_engine_gives_itself_are_logged_too(tls_app, pki):
    # Static files, output-cache hits and filtered paths never reach the host; the access log
    # and the per-status counts must still see them.
    token = uuid.uuid4().hex
    c = _https(tls_app, pki)
    for path, status in (("/static/hello.txt?" + token, 200), ("/cached?" + token, 200), ("/cached?" + token, 200),
                         ("/static/secret.bak?" + token, 404)):
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        assert r.status == status, path
    lines = _log_lines(tls_app.access_log, token)
    deadline = time.monotonic() + 5
    while len(lines) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
        lines = _log_lines(tls_app.access_log, token)
    got = [re.search(r'"GET (\S+) HTTP/1\.1" (\d{3}) ', l).groups() for l in lines]
    assert got == [("/static/hello.txt?" + token, "200"), ("/cached?" + token, "200"), ("/cached?" + token, "200"),
                   ("/static/secret.bak?" + token, "404")], lines
