"""The pages a newcomer follows, run as written: every command block of README.md,
docs/guide.md and docs/python.md, in page order, from a stand-in for the checkout's root
(its entries linked, `build/` the build under test), each page's session in a network
namespace of its own, so that the ports the pages name (50051, 9090) are free whatever
else runs on the machine. README's `scripts/quickstart` (its build skipped: the suite has
built it) is the setup python.md names: its "Install" block then installs the package,
and the Python blocks run in order with that install against the quickstart's server.
guide.md starts its own server, as it says.

A block the test machine cannot run (a GPU, a cluster, a download, your own program) is
marked on its page by `<!-- not run: why -->` on the line before it, and named in
NOT_RUN below: a mark not named here, or a name not marked there, fails.
README's second command, `scripts/test`, is the suite this test belongs to.

Needs root (`unshare -n`), as `scripts/test` has. Run by ctest (docs_run_as_written)."""
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

SRC = os.path.abspath(os.environ.get("TGRAPH_SOURCE_DIR", "."))
BIN = os.path.abspath(os.environ.get("TGRAPH_BIN_DIR", "build"))
PAGES = ("README.md", "docs/guide.md", "docs/python.md")

# (page, the block's first line) -> what its mark must say.
NOT_RUN = {
    ("README.md", "CMakeLists.txt   one build; targets per component"): "a listing",
    ("docs/guide.md", 'XLA_FLAGS="--xla_dump_to=/tmp/dump" python train.py'): "needs your program",
    ("docs/guide.md", 'XLA_FLAGS="--xla_dump_to=/tmp/dump --xla_gpu_dump_autotune_logs_to=/tmp/logs.pb" python '
                      'train.py'): "needs a GPU",
    ("docs/guide.md", "build/model/hlo/tgraph-featurize fusions --in $A --logs /tmp/logs.pb \\"):
        "needs XLA's autotuning logs from a GPU",
    ("docs/guide.md", "import jax, jax.numpy as jnp"): "needs JAX's CUDA plugin",
    ("docs/guide.md", "docker build -t registry.example.com/tgraph/tgraph:0.1.0 ."): "needs Docker and a Kubernetes",
    ("docs/guide.md", "scripts/fuzz 600"): "scripts/test runs scripts/fuzz",
    ("docs/python.md", "python3 -m venv venv"): "fetches build tools from PyPI",
    ("docs/python.md", "import triton, triton.language as tl"): "a sketch",
    ("docs/python.md", "import tgraph.triton as tt"): "a sketch",
    ("docs/python.md", "TGRAPH_BIN_DIR=build TGRAPH_SOURCE_DIR=. PYTHONPATH=build/client/python \\"):
        "ctest's python_client",
}


class Block:
    def __init__(self, page, line, kind, text, not_run):
        self.page, self.line, self.kind, self.text, self.not_run = page, line, kind, text, not_run

    @property
    def first_line(self):
        """Its first line, without a trailing comment."""
        return re.sub(r"\s{2,}#.*$", "", self.text.splitlines()[0]).strip()

    def __repr__(self):
        return f"{self.page}:{self.line} ({self.first_line!r})"


def page_blocks(page):
    """The page's code blocks, fenced (```sh, ```python: by their language) and indented
    (4 spaces or more after a blank line, outside a fence; a shell block), each with its
    `<!-- not run: why -->` mark when the last non-blank line before it is one."""
    lines = open(os.path.join(SRC, page), encoding="utf-8").read().splitlines()
    out, i = [], 0

    def mark_before(start):
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        m = re.fullmatch(r"<!-- not run: (.*) -->", lines[j].strip()) if j >= 0 else None
        return m.group(1) if m else None

    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if fence:
            end = next(k for k in range(i + 1, len(lines)) if lines[k].startswith("```"))
            kind = {"python": "python", "sh": "shell", "bash": "shell", "": "shell"}.get(fence.group(1))
            if kind:
                out.append(Block(page, i + 1, kind, "\n".join(lines[i + 1:end]) + "\n", mark_before(i)))
            i = end + 1
            continue
        if lines[i].startswith("    ") and lines[i].strip() and (i == 0 or not lines[i - 1].strip()):
            end = i
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()) and \
                    not (not lines[end].strip() and (end + 1 >= len(lines) or not lines[end + 1].startswith("    "))):
                end += 1
            text = textwrap.dedent("\n".join(lines[i:end])) + "\n"
            out.append(Block(page, i + 1, "shell", text, mark_before(i)))
            i = end
            continue
        i += 1
    return out


def all_blocks():
    return [b for page in PAGES for b in page_blocks(page)]


def test_every_block_is_run_or_marked_on_its_page_and_named_here():
    blocks = all_blocks()
    marked = {(b.page, b.first_line): b.not_run for b in blocks if b.not_run}
    assert set(marked) == set(NOT_RUN), (sorted(set(marked) - set(NOT_RUN)), sorted(set(NOT_RUN) - set(marked)))
    for key, why in NOT_RUN.items():
        assert why in marked[key], (key, marked[key])
    run = [b for b in blocks if not b.not_run]
    assert {b.page for b in run} == set(PAGES)
    assert sum(b.kind == "python" for b in run) == 5, run


def test_the_block_reader_finds_fences_indented_blocks_and_marks(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("Text\n\n    one\n\n    two\nafter\n\n<!-- not run: needs X -->\n\n```sh\nthree\n```\n"
                    "- item\n\n      nested\n\n```python\nx = 1\n```\n```json\n{}\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", str(tmp_path))
    got = [(b.line, b.kind, b.text, b.not_run) for b in page_blocks("page.md")]
    assert got == [(3, "shell", "one\n\ntwo\n", None), (10, "shell", "three\n", "needs X"),
                   (15, "shell", "nested\n", None), (17, "python", "x = 1\n", None)]


def checkout(tmp_path):
    """A stand-in for the checkout's root: its entries linked (not build outputs or what
    the pages write), `build` the build under test."""
    root = tmp_path / "checkout"
    root.mkdir()
    for name in os.listdir(SRC):
        if not (name.startswith(".") or name.startswith("build") or name == "out"):
            os.symlink(os.path.join(SRC, name), root / name)
    os.symlink(BIN, root / "build")
    return root


# Brings the new network namespace's loopback up (SIOCSIFFLAGS: IFF_UP | IFF_LOOPBACK |
# IFF_RUNNING) without iproute2, then runs the session's script.
LOOPBACK_UP = ("import fcntl, os, socket, struct, sys; "
               "fcntl.ioctl(socket.socket(), 0x8914, struct.pack('16sH22x', b'lo', 0x1 | 0x8 | 0x40)); "
               "os.execvp('bash', ['bash', sys.argv[1]])")


def run_session(root, script, timeout):
    """`script` in bash (errexit, pipefail), in a network namespace of its own, from
    `root`; every process it leaves is killed at its end."""
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.fail("unshare -n is refused: this test needs root (scripts/test runs as root)")
    path = root / "session.sh"
    path.write_text("set -euo pipefail\n" + script)
    p = subprocess.Popen(["unshare", "-n", sys.executable, "-c", LOOPBACK_UP, str(path)], cwd=root,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                         env=dict(os.environ, PYTHONPATH="", PYTHONDONTWRITEBYTECODE="1"))
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        pytest.fail(f"the session ran past {timeout} s:\n{out[-4000:]}")
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the servers it started
        except ProcessLookupError:
            pass
    return p.returncode, out


def announced(block):
    """The block, after a line saying which it is (so a failure names its block)."""
    return f"echo {shlex.quote('>>> ' + repr(block))}\n{block.text}"


def test_the_readme_quickstart_then_python_md_run_as_written(tmp_path):
    root = checkout(tmp_path)
    readme = [b for b in page_blocks("README.md") if not b.not_run]
    assert len(readme) == 1
    commands = [line.split("#")[0].strip() for line in readme[0].text.splitlines() if line.split("#")[0].strip()]
    assert commands == ["scripts/quickstart", "scripts/test"]
    python_md = [b for b in page_blocks("docs/python.md") if not b.not_run]
    shell = [b for b in python_md if b.kind == "shell"]
    assert [b.first_line for b in shell] == ["/usr/bin/python3 -m venv --system-site-packages venv"]
    (root / "python_md.py").write_text("\n".join(b.text for b in python_md if b.kind == "python"))
    script = ("trap 'kill $(cat out/quickstart/server.pid) 2>/dev/null' EXIT\n"
              "echo '>>> README.md: scripts/quickstart'\nSKIP_BUILD=1 scripts/quickstart\n" +
              "".join(announced(b) for b in shell) +
              "echo '>>> docs/python.md: its Python blocks'\nvenv/bin/python python_md.py\n")
    rc, out = run_session(root, script, timeout=400)
    assert rc == 0, out[-6000:]
    quickstart, python_md_out = out.split(">>> docs/python.md: its Python blocks\n")
    assert "published layout:xla:random as version 1" in quickstart and "tgraph-server is running" in quickstart
    assert re.search(r"trained on synthetic data only", quickstart)
    lines = python_md_out.splitlines()
    assert sum(line.startswith("round ") for line in lines) == 5 + 3, python_md_out
    assert any(line.endswith("choices need a compiler hook") for line in lines), python_md_out
    # The reports reached the quickstart's store: 5 rounds of 8 configurations, 3 of 4.
    shards = [f for d, _, fs in os.walk(root / "out" / "quickstart" / "measurements") for f in fs
              if f.endswith(".npz")]
    assert len(shards) == 5 + 3, shards


def test_the_guide_runs_as_written(tmp_path):
    root = checkout(tmp_path)
    blocks = [b for b in page_blocks("docs/guide.md") if not b.not_run]
    assert all(b.kind == "shell" for b in blocks)
    script = "trap 'kill $(jobs -p) 2>/dev/null' EXIT\n" + "".join(announced(b) for b in blocks)
    rc, out = run_session(root, script, timeout=500)
    assert rc == 0, out[-6000:]
    assert (root / "data" / "ci" / "npz" / "layout" / "xla" / "random" / "valid").is_dir()
    assert (root / "registry" / "layout:xla:random" / "1" / "manifest.json").exists()
    assert (root / "proposals.npy").exists() and (root / "mlp.applied.txt").read_text().startswith("HloModule")
    # The second search joined the 4 rows `report` stored: excluded, their runtimes followed.
    assert ("0 measured rows excluded and 4 more the server's store held, the store's 4 fastest started from, 4 "
            "runtimes correcting the scores") in out, out[-3000:]
    assert not ({r.tobytes() for r in np.load(root / "next.npy")} & {r.tobytes() for r in np.load(root / "proposals.npy")})
    assert (root / "next.npy").exists() and (root / "next.reference.npy").exists()
    assert len((root / "fusions" / "fusions.tsv").read_text().splitlines()) == 1 + 5
    reports = [f for d, _, fs in os.walk(root / "measurements") for f in fs if f.endswith(".npz")]
    assert len(reports) == 1, reports
