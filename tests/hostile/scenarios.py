"""The hostile-client scenarios, at two sizes: `ci` (tests/hostile/test_hostile.py, seconds
each) and `bench` (bench/hostile.py, the sizes of issue 12 item 3). One scenario = one
attack run under `Watch` against a fresh reference app, and what it must show:
- `cut`: the attacker's connections are ended by the server (GOAWAY, reset, close, 408);
- `rss_mb`: the server's RSS peak stays within this many MB above its baseline;
- `kb_per_conn`: that growth divided by the most attacker connections open at once stays
  within this many KiB (slowloris: a trickled head is held before hyper gets the
  connection, ~7 KiB each; hyper's buffers made it ~28 KiB, src/conn/sniff.rs).
Every scenario also requires the server to stay up and the probe (a polite client on its
own connection) to be answered throughout, without a failure.
"""
import attacks_h1 as h1
import attacks_h2 as h2

# The reference app's limits (tests/REFERENCE_APP.md): header timeout 1 s, idle timeout
# 5 s, handler timeout 3 s. An attack that is cut by the idle timeout runs past it.
SLOW_ANSWER = b"GET /stream?n=4096&size=65536 HTTP/1.1\r\nHost: t\r\n\r\n"   # 256 MiB each

SCENARIOS = {
    # name: (function, ci kwargs, bench kwargs, checks)
    "h2_rapid_reset": (h2.rapid_reset, dict(seconds=3, conns=2), dict(seconds=30, conns=16),
                       dict(cut=True, rss_mb=60)),
    "h2_continuation_flood": (h2.continuation_flood, dict(seconds=3, conns=2), dict(seconds=30, conns=16),
                              dict(cut=True, rss_mb=60)),
    "h2_ping_flood": (h2.control_flood, dict(seconds=4, conns=2, kind="ping"), dict(seconds=30, conns=16, kind="ping"),
                      dict(cut=True, rss_mb=60)),
    "h2_settings_flood": (h2.control_flood, dict(seconds=4, conns=2, kind="settings"),
                          dict(seconds=30, conns=16, kind="settings"), dict(cut=True, rss_mb=60)),
    "h2_empty_data_flood": (h2.empty_data_flood, dict(seconds=8, conns=2), dict(seconds=30, conns=16),
                            dict(cut=True, rss_mb=60)),
    "h2_window_never_opened": (h2.window_never_opened, dict(seconds=9, conns=2, streams=20),
                               dict(seconds=30, conns=16, streams=100), dict(cut=True, rss_mb=120)),
    "h2_hpack_bomb": (h2.hpack_abuse, dict(seconds=3, conns=2, kind="bomb"), dict(seconds=30, conns=16, kind="bomb"),
                      dict(cut=True, rss_mb=60)),
    "h1_slowloris": (h1.slowloris, dict(seconds=4, conns=500), dict(seconds=30, conns=5000),
                     dict(cut=True, rss_mb=60, kb_per_conn=18)),
    "h1_slow_reader": (h1.slow_reader, dict(seconds=9, conns=20, request=SLOW_ANSWER),
                       dict(seconds=30, conns=200, request=SLOW_ANSWER), dict(cut=False, fds_back=True, rss_mb=120)),
    "h1_header_bombs": (h1.header_bombs, dict(seconds=3, conns=2), dict(seconds=30, conns=8),
                        dict(cut=False, refused=True, rss_mb=60)),
    "never_answered": (h1.never_answered, dict(h1_conns=2000, h2_conns=10, h2_streams=100, wait=15),
                       dict(h1_conns=10000, h2_conns=40, h2_streams=200, wait=60),
                       dict(cut=False, all_503=True, rss_mb=150)),
}


def run(pid, port, name, size):
    """Runs scenario `name` at `size` ("ci" or "bench") against the app `pid` on `port`;
    returns (outcome, watch report)."""
    import time
    from hostile import Watch
    fn, ci, bench, _ = SCENARIOS[name]
    kwargs = dict(ci if size == "ci" else bench)
    with Watch(pid, port) as w:
        started = time.monotonic()
        if fn is h1.never_answered:
            outcome = fn(port, **kwargs)
        else:
            outcome = fn(port, kwargs.pop("seconds"), **kwargs)
        # Let the server finish judging what is left before the last samples.
        time.sleep(1.0)
    report = w.report()
    report["fds_back_after_s"] = w.fds_back_after(started)
    return outcome, report


def problems(name, outcome, report, alive):
    """What went wrong, as sentences (empty when the scenario passed)."""
    checks = SCENARIOS[name][3]
    out = []
    if not alive:
        out.append("the server died")
    probe = report["probe_attack"]
    if probe["failures"]:
        out.append("the probe failed %d times: %s" % (probe["failures"], report["probe_failures"]))
    if probe["answers"] < 10:
        out.append("the probe got only %d answers during the attack" % probe["answers"])
    grew = report["rss_peak_mb"] - report["rss_baseline_mb"]
    if grew > checks["rss_mb"]:
        out.append("RSS grew %.1f MB (bound %d MB)" % (grew, checks["rss_mb"]))
    if checks.get("kb_per_conn") and outcome.get("peak_open"):
        per = grew * 1024 / outcome["peak_open"]
        if per > checks["kb_per_conn"]:
            out.append("RSS grew %.1f KiB per open attacker connection (bound %d KiB; %d open at most)"
                       % (per, checks["kb_per_conn"], outcome["peak_open"]))
    if checks.get("cut") and not outcome.get("cut_off"):
        out.append("no attacker connection was cut off: %s" % dict(outcome))
    if checks.get("cut") and outcome.get("uncut"):
        out.append("%d attacker connections were never cut off" % outcome["uncut"])
    if checks.get("fds_back") and report["fds_back_after_s"] is None:
        out.append("the server still holds the attackers' connections (descriptors %s -> peak %s)"
                   % (report["fds_baseline"], report["fds_peak"]))
    if checks.get("refused"):
        for bomb, statuses in outcome["statuses"].items():
            bad = {s: n for s, n in statuses.items() if s not in ("400", "413", "414", "431", "closed")}
            if bad:
                out.append("header bomb %s got %s" % (bomb, bad))
    if checks.get("all_503"):
        if outcome["unanswered"] or set(outcome["statuses"]) != {"503"}:
            out.append("never-answered requests: statuses %s, %d unanswered"
                       % (outcome["statuses"], outcome["unanswered"]))
    return out
