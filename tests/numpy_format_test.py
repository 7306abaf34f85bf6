#!/usr/bin/env python3
"""Checks that tgraph-synth output loads with numpy.load into exactly FORMAT.md's keys,
dtypes and shapes. Usage: numpy_format_test.py TGRAPH_SYNTH WORKDIR. Exits 77 (skipped)
when numpy is not installed."""
import glob
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed: skipped")
    sys.exit(77)

synth, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
subprocess.run([synth, "--out", work, "--preset", "tiny", "--seed", "3"], check=True, stdout=subprocess.DEVNULL)

checked = 0
for path in sorted(glob.glob(os.path.join(work, "npz/layout/*/*/*/*.npz"))):
    d = np.load(path)
    assert set(d.files) == {"node_feat", "node_opcode", "edge_index", "node_config_ids",
                            "node_config_feat", "config_runtime"}, (path, d.files)
    n, m = d["node_feat"].shape[0], d["edge_index"].shape[0]
    nc, c = d["node_config_ids"].shape[0], d["config_runtime"].shape[0]
    assert d["node_feat"].dtype == np.float32 and d["node_feat"].shape == (n, 140), path
    assert d["node_opcode"].dtype == np.uint8 and d["node_opcode"].shape == (n,), path
    assert d["edge_index"].dtype == np.int64 and d["edge_index"].shape == (m, 2), path
    assert d["node_config_ids"].dtype == np.int64, path
    assert d["node_config_feat"].dtype == np.float32 and d["node_config_feat"].shape == (c, nc, 18), path
    assert d["config_runtime"].dtype == np.int64, path
    assert set(np.unique(d["node_opcode"][d["node_config_ids"]])) <= {26, 34, 75}, path
    assert d["node_config_feat"].min() >= -1 and d["node_config_feat"].max() <= 5, path
    assert (d["edge_index"][:, 0] > d["edge_index"][:, 1]).all(), path  # [consumer, producer], topological
    checked += 1
for path in sorted(glob.glob(os.path.join(work, "npz/tile/xla/*/*.npz"))):
    d = np.load(path)
    assert set(d.files) == {"node_feat", "node_opcode", "edge_index", "config_feat", "config_runtime",
                            "config_runtime_normalizers"}, (path, d.files)
    c = d["config_runtime"].shape[0]
    assert d["config_feat"].dtype == np.float32 and d["config_feat"].shape == (c, 24), path
    assert d["config_runtime"].dtype == np.int64 and d["config_runtime_normalizers"].shape == (c,), path
    checked += 1
assert checked == 30, checked
shutil.rmtree(work)
print(f"numpy.load: {checked} files have FORMAT.md's keys, dtypes and shapes")
