"""NVIDIA's nvMatmulHeuristics as a baseline of tgraph-eval, end to end on the real H100
tile measurements (tests/data/real/gpu-tiles): scripts/nvmmh-orders writes its order of
each test problem's candidates (the test environment's nvidia-matmul-heuristics, no GPU),
and tgraph-eval --baselines --baseline_orders scores it beside the model and the built-in
baselines; its figures are checked against the CSV read here.

Run by ctest (nvmmh_baseline) with pytest; the fixtures are the Python client's.
"""
import csv
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.environ.get("TGRAPH_SOURCE_DIR", "."), "client", "python", "tests"))
from conftest import REAL, SRC, binary  # noqa: E402
from conftest import run as run_strings  # noqa: E402

TILES = os.path.join(REAL, "gpu-tiles")


def run(cmd, ok=True):
    if ok:
        return run_strings([str(c) for c in cmd])
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    assert r.returncode != 0, r.stdout
    return r


def csv_ms():
    """(stem, configuration name) -> ms, from the CSV."""
    out = {}
    with open(os.path.join(TILES, "triton_gemm_h100.csv")) as f:
        for row in csv.DictReader(f):
            if row["block_m"] == "cublas" or row["ms"] == "refused":
                continue
            stem = f"gemm_{row['dtype']}_{row['M']}x{row['N']}x{row['K']}"
            name = f"{row['block_m']}x{row['block_n']}x{row['block_k']} w{row['num_warps']} s{row['num_stages']}"
            out[(stem, name)] = float(row["ms"])
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nvmmh")
    root, registry = tmp / "data", tmp / "registry"
    run([binary("model", "hlo", "tgraph-featurize"), "tiles", "--csv", os.path.join(TILES, "triton_gemm_h100.csv"),
         "--hlo_dir", os.path.join(TILES, "hlo"), "--out_root", root])
    run([binary("model", "train", "tgraph-train"), "--data", root, "--collection", "tile@h100-triton", "--run_dir",
         tmp / "run", "--registry", registry, "--profile", "quick", "--folds", "2", "--epochs", "1", "--threads", "2",
         "--progress=false"])
    return tmp, root, registry


def test_nvmatmulheuristics_orders_every_test_problem_and_tgraph_eval_scores_them(trained):
    tmp, root, registry = trained
    orders = tmp / "nvmmh.tsv"
    out = run([sys.executable, os.path.join(SRC, "scripts", "nvmmh-orders"), "--data", root, "--collection",
               "tile@h100-triton", "--split", "test", "--out", orders])
    assert "12 problems of tile@h100-triton test" in out.stdout, out.stdout
    lines = orders.read_text().splitlines()
    assert lines[0].startswith("# method: nvMatmulHeuristics 0.1.0.27 (Triton, H100_SXM")
    rows = [line.split("\t") for line in lines if not line.startswith("#")]
    by_problem = {}
    for stem, name in rows:
        by_problem.setdefault(stem, []).append(name)
    # Every legal candidate of each test problem once: 260 for bf16, 198 for f32.
    assert len(by_problem) == 12
    for stem, names in by_problem.items():
        assert len(names) == len(set(names)) == (260 if "_bf16_" in stem else 198), stem

    ev = run([binary("model", "train", "tgraph-eval"), "--data", root, "--collection", "tile@h100-triton",
              "--registry", registry, "--split", "test", "--baselines", "--baseline_orders", orders, "--json"])
    methods = [m["method"] for m in json.loads(ev.stdout)["methods"]]
    assert methods[-1] == "random order (expected)"
    assert methods[-2] == lines[0][len("# method: "):]
    report = json.loads(ev.stdout)["methods"][-2]["report"]
    ms = csv_ms()
    for graph in report["graphs"]:
        names = by_problem[graph["graph"]]
        fastest = min(ms[(graph["graph"], n)] for n in names)
        assert graph["top1_error"] == pytest.approx(ms[(graph["graph"], names[0])] / fastest - 1, rel=1e-6)


def test_orders_that_miss_a_problem_or_come_without_baselines_are_refused(trained):
    tmp, root, registry = trained
    partial = tmp / "partial.tsv"
    partial.write_text("# method: mine\ngemm_bf16_128x256x256\t32x32x32 w4 s2\n")
    r = run([binary("model", "train", "tgraph-eval"), "--data", root, "--collection", "tile@h100-triton",
             "--registry", registry, "--split", "test", "--baselines", "--baseline_orders", partial], ok=False)
    assert f"{partial}: no order of problem gemm_" in r.stderr, r.stderr
    r = run([binary("model", "train", "tgraph-eval"), "--data", root, "--collection", "tile@h100-triton",
             "--registry", registry, "--split", "test", "--baseline_orders", partial], ok=False)
    assert r.returncode == 2 and "--baseline_orders needs --baselines" in r.stderr, r.stderr
    bad = tmp / "bad.tsv"
    bad.write_text("problem\tconfiguration\n")
    r = run([binary("model", "train", "tgraph-eval"), "--data", root, "--collection", "tile@h100-triton",
             "--registry", registry, "--split", "test", "--baselines", "--baseline_orders", bad], ok=False)
    assert f"{bad}:1: expected '# method: NAME' first" in r.stderr, r.stderr
