"""Memory of the app under test, read from /proc: the resident set of its process and every
descendant (a host may run under a launcher, e.g. Wine's or a shell wrapper)."""
import os

# tests/run_c.sh also runs the streaming files against the AddressSanitizer build of the C app,
# whose allocator keeps freed memory in quarantine: RSS says nothing there, so it sets this to
# "off" and only the memory assertions (not the tests) are left out.
RSS_CHECKS = os.environ.get("EMBER_CONFORMANCE_RSS", "on") != "off"


def assert_grown_below(before_kib, after_kib, limit_kib, what):
    if RSS_CHECKS:
        assert after_kib - before_kib < limit_kib, "app RSS grew by %d KiB %s" % (after_kib - before_kib, what)


def _children():
    kids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name is in parentheses and may hold spaces: split after the last ')'
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def rss_kib(pid):
    """VmRSS of pid and all its descendants, in KiB."""
    kids = _children()
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(kids.get(p, []))
        try:
            with open("/proc/%d/status" % p) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total
