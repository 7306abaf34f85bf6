#!/usr/bin/env python3
"""The reverse family through the real tools: train on the H200's 56 judged problems of
shapes off the power-of-two grid (runs 1 and 3: the replay's set), test on its 72
problems of the grid's shapes. Same recipe as scripts/triton-replay (quick profile, 4
folds, 300 epochs), then tgraph-eval with the baselines and nvMatmulHeuristics' orders.
  python3 reverse.py WORK            (BUILD_DIR: default build; run from the checkout's root)"""
import os
import subprocess
import sys

ROOT = os.path.abspath(".")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import importlib.machinery  # noqa: E402

replay = importlib.machinery.SourceFileLoader("replay", os.path.join(ROOT, "scripts", "triton-replay")).load_module()

work = os.path.abspath(sys.argv[1])
build = os.path.abspath(os.environ.get("BUILD_DIR", "build"))
os.makedirs(work, exist_ok=True)
problems = replay.read_problems()
train_keys = sorted(k for k in problems if replay.judged(k))
grid = replay.read_csv(os.path.join(replay.H200, "triton_gemm_h200.csv"), lambda s: s in replay.H100_SHAPES)
train_csv, test_csv = os.path.join(work, "train.csv"), os.path.join(work, "test.csv")
replay.write_csv(train_csv, problems, train_keys)
replay.write_csv(test_csv, grid, sorted(grid))
data, hlo = os.path.join(work, "data"), os.path.join(replay.H200, "hlo")
replay.run([os.path.join(build, "model/hlo/tgraph-featurize"), "tiles", "--csv", train_csv, "--hlo_dir", hlo,
            "--name", "h200-triton", "--gpu", "NVIDIA H200", "--test_csv", test_csv, "--test_hlo_dir", hlo,
            "--out_root", data], stdout=subprocess.DEVNULL)
replay.run([os.path.join(build, "model/train/tgraph-train"), "--data", data, "--collection", "tile@h200-triton",
            "--run_dir", os.path.join(work, "run"), "--registry", os.path.join(work, "registry"), "--profile", "quick",
            "--folds", "4", "--train_folds", "4", "--keep_folds", "4", "--epochs", os.environ.get("EPOCHS", "300"),
            "--threads", "2", "--progress=false"])
replay.run([sys.executable, os.path.join(ROOT, "scripts/nvmmh-orders"), "--data", data, "--collection",
            "tile@h200-triton", "--split", "test", "--out", os.path.join(work, "nvmmh.tsv")])
