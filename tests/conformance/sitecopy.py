"""The folder the reference app serves at /static and /app: a copy of samples/www made for
this run, plus symbolic links that lead out of it and links that stay inside (git keeps no
link that escapes a sample folder). It lives under target/ and is named by a path relative
to the repository root, the app's working directory, so that a Windows build under Wine
reads it too. EMBER_WWW set by the caller wins: that folder is served as it is."""
import atexit
import os
import shutil

# The file the links lead to, outside the served folder; the tests look for its text.
OUTSIDE_TEXT = b"outside the served folder: never sent\n"
LINKS_OUT = ("escape.txt", "escape-abs.txt", "escape-dir")
LINKS_IN = ("alias.txt", "alias-abs.txt")


def prepare_www(repo_root):
    if os.environ.get("EMBER_WWW"):
        os.environ.setdefault("EMBER_WWW_LINKS", "0")
        return
    rel = os.path.join("target", "conformance-www-%d" % os.getpid())
    _remove_stale(os.path.join(repo_root, "target"))
    base = os.path.join(repo_root, rel)
    shutil.rmtree(base, ignore_errors=True)
    www = os.path.join(base, "www")
    shutil.copytree(os.path.join(repo_root, "samples", "www"), www)
    with open(os.path.join(base, "outside.txt"), "wb") as f:
        f.write(OUTSIDE_TEXT)
    links = "1"
    try:
        os.symlink(os.path.join("..", "outside.txt"), os.path.join(www, "escape.txt"))
        os.symlink(os.path.join(base, "outside.txt"), os.path.join(www, "escape-abs.txt"))
        os.symlink("..", os.path.join(www, "escape-dir"))
        os.symlink("hello.txt", os.path.join(www, "alias.txt"))
        os.symlink(os.path.join(www, "hello.txt"), os.path.join(www, "alias-abs.txt"))
    except OSError:
        links = "0"   # a filesystem without symlinks: the link tests skip
    atexit.register(shutil.rmtree, base, True)
    os.environ["EMBER_WWW"] = os.path.join(rel, "www")
    os.environ["EMBER_WWW_LINKS"] = links


def _remove_stale(target):
    """Copies left by runs that were killed before their exit handler ran."""
    try:
        names = os.listdir(target)
    except OSError:
        return
    for name in names:
        pid = name[len("conformance-www-"):] if name.startswith("conformance-www-") else ""
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(target, name), ignore_errors=True)
        except OSError:
            pass
