#!/usr/bin/env python3
"""scripts/split-configs on the real unet_3d files: the held-out and training files
partition the graph's configurations (rows and runtimes kept together), every other
array is copied unchanged, --also files are copied whole, and bad arguments are refused.
Usage: split_configs_test.py SPLIT_CONFIGS WORKDIR REAL_ROOT. Exits 77 (skipped) when
numpy is not installed."""
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed: skipped")
    sys.exit(77)


def main():
    tool, work, real = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    graph = os.path.join(real, "npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz")
    other = os.path.join(real, "npz/layout/xla/random/valid/unet_3d.4x4.bf16.npz")
    subprocess.run([sys.executable, tool, graph, work, "--holdout", "0.2", "--parts", "5", "--also", other],
                   check=True)
    base = os.path.join(work, "npz/layout/xla/default")
    src = np.load(graph)
    n = src["config_runtime"].shape[0]
    files = [os.path.join(base, "valid", "unet_3d.4x4.bf16.heldout.npz")] + \
            [os.path.join(base, "train", f"unet_3d.4x4.bf16.part{p}.npz") for p in range(5)]
    seen = []
    for path in files:
        d = np.load(path)
        for key in src.files:
            if key not in ("node_config_feat", "config_runtime"):
                assert np.array_equal(d[key], src[key]), (path, key)
                assert d[key].dtype == src[key].dtype, (path, key)
        # Each configuration's rows travel with its runtime: find it in the source.
        for row, runtime in zip(d["node_config_feat"], d["config_runtime"]):
            matches = np.nonzero((src["config_runtime"] == runtime) &
                                 np.all(src["node_config_feat"] == row, axis=(1, 2)))[0]
            assert matches.size >= 1, (path, runtime)
            seen.append(int(matches[0]))
    assert np.load(files[0])["config_runtime"].shape[0] == round(0.2 * n)
    assert len(seen) == n, (len(seen), n)
    assert sorted(np.load(graph)["config_runtime"][seen].tolist()) == sorted(src["config_runtime"].tolist())
    copied = np.load(os.path.join(base, "valid", "unet_3d.4x4.bf16.other.npz"))
    original = np.load(other)
    for key in original.files:
        assert np.array_equal(copied[key], original[key]), key
    bad = subprocess.run([sys.executable, tool, graph, work + "-bad", "--holdout", "1.5"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--holdout must be in (0, 1)" in bad.stderr, bad.stderr
    print(f"split-configs: {n} configurations partitioned into 1 held-out and 5 training files")


if __name__ == "__main__":
    main()
