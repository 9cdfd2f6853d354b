"""The binding's TLS listeners (SNI, reload, errors naming the file), access log and metrics,
through Python's ssl module and http.client. Certificates from a throwaway CA made with the
openssl command line."""
import http.client
import json
import logging
import shutil
import ssl
import subprocess
import time

import pytest

import ember

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command is not installed")


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Test CA", cwd=d)

    def leaf(name):
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        (d / f"{name}.ext").write_text(f"subjectAltName=DNS:{name},IP:127.0.0.1\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
        return d / f"{name}.pem", d / f"{name}.key"

    return {"dir": d, "ca": str(d / "ca.pem"), "leaf": leaf}


def _get(port, pki, host="localhost", path="/"):
    ctx = ssl.create_default_context(cafile=pki["ca"])
    c = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    subject = dict(x[0] for x in c.sock.getpeercert()["subject"])["commonName"]
    c.close()
    return r.status, body, subject


def _hello(app):
    @app.get("/")
    def root(req):
        return "hello"


def test_https_with_sni_and_a_default_certificate(serve, pki):
    default, a = pki["leaf"]("localhost"), pki["leaf"]("a.test")
    tls = ember.TlsConfig(*default).add(a[0].read_bytes(), a[1].read_bytes(), server_name="a.test")
    app = ember.Server()
    _hello(app)
    app.listen_tls(0, tls=tls)
    app.start(0)
    try:
        port = app.tls_ports[0]
        assert _get(port, pki)[0::2] == (200, "localhost")
        # http.client sends SNI from the host name; "a.test" resolves through the IP SAN path.
        ctx = ssl.create_default_context(cafile=pki["ca"])
        with ctx.wrap_socket(__import__("socket").create_connection(("127.0.0.1", port)), server_hostname="a.test") as s:
            assert dict(x[0] for x in s.getpeercert()["subject"])["commonName"] == "a.test"
    finally:
        app.stop()
    assert app.tls_ports == []


def test_a_proxy_protocol_tls_listener_takes_the_client_from_the_header(pki):
    app = ember.Server()

    @app.get("/who")
    def who(req):
        return req.remote_addr

    app.listen_tls(0, tls=ember.TlsConfig(*pki["leaf"]("localhost")), proxy_protocol=True)
    app.start(0)
    try:
        port = app.tls_ports[0]
        ctx = ssl.create_default_context(cafile=pki["ca"])
        sock = __import__("socket").create_connection(("127.0.0.1", port), timeout=10)
        # The balancer's header comes first, in clear, then the client's handshake.
        sock.sendall(b"PROXY TCP4 203.0.113.9 127.0.0.1 4444 443\r\n")
        with ctx.wrap_socket(sock, server_hostname="localhost") as s:
            s.sendall(b"GET /who HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"\r\n\r\n203.0.113.9:4444"), answer
        # Without the header the listener closes the connection: the handshake fails.
        with pytest.raises((ssl.SSLError, OSError)):
            with ctx.wrap_socket(__import__("socket").create_connection(("127.0.0.1", port), timeout=10),
                                 server_hostname="localhost") as s:
                s.sendall(b"GET /who HTTP/1.1\r\nHost: localhost\r\n\r\n")
                if not s.recv(4096):
                    raise OSError("closed")
    finally:
        app.stop()


def test_reload_uses_new_files_for_new_connections(pki, tmp_path):
    first, second = pki["leaf"]("localhost"), pki["leaf"]("127.0.0.1")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    shutil.copy(first[0], cert)
    shutil.copy(first[1], key)
    app = ember.Server()
    _hello(app)
    app.listen_tls(0, tls=ember.TlsConfig(str(cert), key))
    app.start(0)
    try:
        port = app.tls_ports[0]
        assert _get(port, pki)[2] == "localhost"
        shutil.copy(second[0], cert)
        shutil.copy(second[1], key)
        app.reload_tls()
        assert _get(port, pki, host="127.0.0.1")[2] == "127.0.0.1"
        key.write_text("garbage")
        with pytest.raises(ember.EmberError) as e:
            app.reload_tls()
        assert e.value.name == "EMBER_ERR_INVALID_ARG" and str(key) in str(e.value)
        app.set_tls(ember.TlsConfig(*first))
        assert _get(port, pki)[2] == "localhost"
    finally:
        app.stop()


def test_bad_certificates_are_refused_when_added(pki, tmp_path):
    cert, key = pki["leaf"]("localhost")
    missing = tmp_path / "missing.pem"
    with pytest.raises(ember.EmberError) as e:
        ember.TlsConfig(missing, key)
    assert str(missing) in str(e.value)
    other = pki["leaf"]("other")
    with pytest.raises(ember.EmberError, match="does not belong"):
        ember.TlsConfig(cert, other[1])
    with pytest.raises(TypeError):
        ember.TlsConfig(cert.read_bytes(), key)
    with pytest.raises(TypeError):
        ember.Server().listen_tls(0, tls=ember.TlsConfig())


def test_access_log_to_a_file_and_reopen(serve, tmp_path):
    log = tmp_path / "access.log"
    s = serve(lambda app: _hello(app), access_log=str(log))
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    c.request("GET", "/?one", headers={"User-Agent": "pytest"})
    assert c.getresponse().read()
    rotated = tmp_path / "access.log.1"
    deadline = time.monotonic() + 5
    while "GET /?one" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.02)
    log.rename(rotated)
    s.app.reopen_access_log()
    c.request("GET", "/?two")
    assert c.getresponse().read()
    deadline = time.monotonic() + 5
    while not log.exists() or "GET /?two" not in log.read_text():
        assert time.monotonic() < deadline, "no line for the second request in the new file"
        time.sleep(0.02)
    assert '"GET /?one HTTP/1.1" 200 5 "-" "pytest"' in rotated.read_text()


def test_access_log_to_logging_as_json(serve, caplog):
    caplog.set_level(logging.INFO, logger="ember.access")
    s = serve(lambda app: _hello(app), access_log=True, access_log_format="json")
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    c.request("GET", "/nope")
    assert c.getresponse().status == 404
    deadline = time.monotonic() + 5
    while not [r for r in caplog.records if r.name == "ember.access"]:
        assert time.monotonic() < deadline, "no access line reached logging"
        time.sleep(0.02)
    line = json.loads([r for r in caplog.records if r.name == "ember.access"][0].getMessage())
    assert (line["method"], line["target"], line["status"], line["tls"]) == ("GET", "/nope", 404, False)


def test_metrics_path_and_text(serve):
    s = serve(lambda app: _hello(app), metrics_path="/metrics")
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    for _ in range(2):
        c.request("GET", "/")
        assert c.getresponse().read() == b"hello"
    c.request("GET", "/metrics")
    r = c.getresponse()
    text = r.read().decode()
    assert r.status == 200 and r.getheader("Content-Type").startswith("text/plain; version=0.0.4")
    assert 'ember_responses_total{code="200"}' in text
    assert "ember_request_duration_seconds_count" in s.app.metrics()
    with pytest.raises(ValueError):
        ember.Server(access_log_format="xml")
