"""Issue 12 item 4: the reference app under `ulimit -n 256` with 1,000 clients.

The app runs with 256 descriptors; 1,000 clients connect (the kernel's listen backlog holds
the ones the app cannot accept) and each asks for `/slow?ms=2000`, so the accepted ones
stay busy and then idle (the app's idle timeout is 5 s) instead of being closed as silent
clients after the 1 s header timeout: the app stays out of descriptors for seconds. Then
the accept loop must back off instead of spinning (CPU time read from /proc stays low), the
process must stay up and answer the connections it has, and once the clients leave it
must accept and serve again. At the end it still stops cleanly on SIGTERM.

Run: tests/run_exhaustion.sh [app command]   (default samples/c/ember_ref)
"""
import os
import resource
import shlex
import signal
import socket
import time

import pytest

from appproc import App

CLIENTS = 1000
FD_LIMIT = 256
# A spinning accept loop burns a whole core (1.0 s of CPU per second); backing off costs
# next to nothing. 0.2 leaves room for a loaded CI machine and the app's own threads.
MAX_CPU_SHARE = 0.2
# Accept errors logged at most this often (issue 13 item 10: a throttle).
MAX_LOG_LINES_PER_S = 5
SAMPLE_S = 2.0
MEASURED = {}
# Long enough to keep the accepted connections busy through the sample, shorter than the
# app's 3 s handler timeout.
SLOW_MS = 2000


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of the whole line (11 and 12 after the name).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def get(port, path="/", timeout=5.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" % path.encode())
        return read_all(s)


def read_all(s):
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        out += chunk
    return out


@pytest.fixture(scope="module")
def app():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = CLIENTS + 512
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip("this test needs %d descriptors for its clients (hard limit %d)" % (want, hard))
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    cmd = os.environ.get("EMBER_APP", "samples/c/ember_ref")
    # The shell sets the limit the way a user would, then becomes the app.
    the_app = App("sh -c %s %s" % (shlex.quote('ulimit -n %d && exec "$0" "$@"' % FD_LIMIT), cmd))
    the_app.start()
    yield the_app
    the_app.cleanup()


def stderr_text(app):
    app.stderr_file.flush()
    with open(app.stderr_file.name, "rb") as f:
        return f.read().decode("utf-8", "replace")


def test_fd_exhaustion_backs_off_keeps_serving_and_recovers(app):
    pid = app.proc.pid
    with open("/proc/%d/limits" % pid) as f:
        assert any(l.startswith("Max open files") and " %d " % FD_LIMIT in l for l in f), \
            "the app does not run with ulimit -n %d" % FD_LIMIT
    assert get(app.port).startswith(b"HTTP/1.1 200"), "the app does not answer before the test"

    clients = []
    request = b"GET /slow?ms=%d HTTP/1.1\r\nHost: t\r\n\r\n" % SLOW_MS
    try:
        for _ in range(CLIENTS):
            try:
                c = socket.create_connection(("127.0.0.1", app.port), timeout=5)
                c.sendall(request)
                clients.append(c)
            except OSError:
                pass
        assert len(clients) >= CLIENTS * 9 // 10, "only %d of %d clients connected" % (len(clients), CLIENTS)
        # Let the app accept all it can; then it is out of descriptors.
        deadline = time.time() + 10
        while open_fds(pid) < FD_LIMIT - 8 and time.time() < deadline:
            time.sleep(0.05)
        fds = open_fds(pid)
        assert fds >= FD_LIMIT - 8, "the app holds only %d descriptors: not exhausted, the test proves nothing" % fds

        log_before = stderr_text(app).count("accept")
        cpu0, t0 = cpu_seconds(pid), time.time()
        time.sleep(SAMPLE_S)
        cpu1, t1 = cpu_seconds(pid), time.time()
        fds_after = open_fds(pid)
        share = (cpu1 - cpu0) / (t1 - t0)
        log_lines = stderr_text(app).count("accept") - log_before
        MEASURED["log_lines_per_s"] = log_lines / (t1 - t0)
        print("out of descriptors: %d then %d fds, CPU %.1f%% of a core, %d accept log lines in %.1f s"
              % (fds, fds_after, share * 100, log_lines, t1 - t0))
        assert app.alive(), "the app died with its descriptors exhausted\n" + app.output_tail()
        assert fds_after >= FD_LIMIT - 8, \
            "descriptors were freed during the sample (%d): it did not measure an exhausted app" % fds_after
        assert share < MAX_CPU_SHARE, \
            "the app used %.0f%% of a core while out of descriptors (a spinning accept loop)" % (share * 100)

        # The connections accepted before the limit got their answers meanwhile.
        first = clients[0]
        first.settimeout(5)
        answer = first.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200") and b"slept_ms" in answer, \
            "an accepted connection was not answered while out of descriptors: %r" % answer[:200]
    finally:
        for c in clients:
            c.close()

    # Descriptors free again: new clients are accepted and served.
    deadline = time.time() + 15
    answer = b""
    while time.time() < deadline:
        try:
            answer = get(app.port, timeout=2)
            if answer.startswith(b"HTTP/1.1 200"):
                break
        except OSError:
            pass
        time.sleep(0.2)
    assert answer.startswith(b"HTTP/1.1 200"), \
        "the app did not serve again after descriptors were freed: %r\n%s" % (answer[:200], app.output_tail())
    for _ in range(20):
        assert get(app.port).startswith(b"HTTP/1.1 200")

    # Idle again: no busy loop left behind.
    time.sleep(1)
    cpu0, t0 = cpu_seconds(pid), time.time()
    time.sleep(2)
    share = (cpu_seconds(pid) - cpu0) / (time.time() - t0)
    assert share < MAX_CPU_SHARE, "the app burns %.0f%% of a core after recovering" % (share * 100)

    assert app.stop(signal.SIGTERM) == 0, "the app did not stop cleanly after the test\n" + app.output_tail()


def test_accept_errors_are_logged_with_a_throttle(app):
    """While out of descriptors the accept error is logged, but not once per retry."""
    lines = [l for l in stderr_text(app).splitlines() if "accept" in l]
    assert lines, "no accept error was logged while descriptors were exhausted"
    rate = MEASURED.get("log_lines_per_s")
    assert rate is not None, "the exhaustion test did not get as far as measuring the log"
    assert rate <= MAX_LOG_LINES_PER_S, \
        "%.1f accept error lines per second while out of descriptors (no throttle); first: %s" % (rate, lines[0])
