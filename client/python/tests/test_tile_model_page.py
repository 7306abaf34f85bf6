"""docs/tile-model.md, run as written: its shell blocks in order (the measuring one on
its stand-in: there is no GPU here; the rest on the H200's real timings), the server in
the background, then its Python block against that server. Run by ctest (tile_model_page)."""
import csv
import os
import re
import socket
import subprocess
import sys

import tgraph
from conftest import SRC, binary

PAGE = os.path.join(SRC, "docs", "tile-model.md")


def blocks(kind):
    text = open(PAGE, encoding="utf-8").read()
    return re.findall(rf"^```{kind}\n(.*?)^```", text, re.M | re.S)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_tile_model_page_runs_as_written(tmp_path):
    shell, python = blocks("sh"), blocks("python")
    assert len(shell) == 3 and len(python) == 1
    measure, rest = shell[0], shell[1:]
    assert measure.startswith("python -m tgraph.measure_tiles")
    tools = [binary("model", "hlo", "tgraph-featurize"), binary("model", "train", "tgraph-train"),
             binary("server", "tgraph-server")]
    here = os.path.dirname(os.path.dirname(os.path.abspath(tgraph.__file__)))  # the package as this test imports it
    env = dict(os.environ, PORT=str(free_port()), PYTHONPATH=here,
               PATH=os.pathsep.join([os.path.dirname(t) for t in tools] + [os.path.dirname(sys.executable),
                                                                           os.environ["PATH"]]))
    # 1. The measuring command, on the stand-in: the CSV the reader takes, every problem of the grid.
    said = subprocess.run(["bash", "-c", measure.replace("\\\n", " ").strip() + " --stand_in"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert said.returncode == 0, said.stderr
    with open(tmp_path / "my_gpu.csv") as f:
        rows = list(csv.DictReader(f))
    assert len({(r["dtype"], r["M"], r["N"], r["K"]) for r in rows}) == 4 * 3 * 3 * 2
    assert sum(r["block_m"] == "cublas" for r in rows) == 72
    next_command = said.stdout.split("next: ", 1)[1].strip().replace("NAME", "mine").replace("DATA", "mine-data")
    ingest = subprocess.run(["bash", "-c", next_command], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert ingest.returncode == 0, ingest.stderr
    assert (tmp_path / "mine-data" / "npz" / "tile" / "@mine" / "tile_space.json").exists()
    # 2-4. Collection, training, the server, and the Python block against it, from a
    # folder that has the checkout's tests/ (the page runs from the checkout's root).
    os.symlink(os.path.join(SRC, "tests"), tmp_path / "tests")
    (tmp_path / "page.py").write_text(python[0])
    script = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null' EXIT\n" + "\n".join(rest) + \
        f"\n{sys.executable} page.py\n"
    ran = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=540)
    assert ran.returncode == 0, ran.stderr[-3000:]
    tiles = eval(ran.stdout.strip().splitlines()[-1])
    assert len(tiles) == 3 and all(re.fullmatch(r"\d+x\d+x\d+ w\d s\d", t) for t in tiles)
