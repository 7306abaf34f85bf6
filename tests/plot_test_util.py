"""What the tests of the plotting scripts (scripts/plot-*) share: running a script,
a fresh work folder once matplotlib is there, and checking a written PNG."""
import os
import shutil
import subprocess
import sys


def run(tool, *args):
    return subprocess.run([sys.executable, tool, *args], capture_output=True, text=True)


def fresh_workdir(work):
    """Empties `work`; False (saying what to install) when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("FAIL: matplotlib is missing; run scripts/install-deps --test (Debian package python3-matplotlib)")
        return False
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return True


def check_png(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    assert len(data) > 10000, (path, len(data))


def check_common_refusals(tool, work, expected):
    """A CSV of other columns and a missing file: exit status 1 and a message naming the
    file (the first also `expected`, what the script reads)."""
    bad = os.path.join(work, "bad.csv")
    with open(bad, "w") as f:
        f.write("a,b\n1,2\n")
    r = run(tool, bad, os.path.join(work, "bad.png"))
    assert r.returncode == 1 and "bad.csv" in r.stderr and expected in r.stderr, r.stderr
    r = run(tool, os.path.join(work, "missing.csv"), os.path.join(work, "m.png"))
    assert r.returncode == 1 and "missing.csv" in r.stderr, r.stderr
