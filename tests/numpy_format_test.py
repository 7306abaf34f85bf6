#!/usr/bin/env python3
"""Checks that tgraph-synth writes what the real TpuGraphs files look like: every file
loads with numpy.load, and each array has the keys, dtypes, ranks and memory order
(.npy 'fortran_order') of the real files of the same collection in REAL_ROOT
(tests/data/real), plus the invariants the real files show (edges u > v, sorted, no
duplicates; node_splits from 0 to n).
Then the same for tgraph-featurize: its layout file of the real tuning data equals the
real unet_3d file array for array, as numpy reads both.
Usage: numpy_format_test.py TGRAPH_SYNTH WORKDIR REAL_ROOT TGRAPH_FEATURIZE. Exits 77
(skipped) when numpy is not installed."""
import glob
import os
import shutil
import subprocess
import sys
import zipfile

try:
    import numpy as np
except ImportError:
    print("numpy is not installed: skipped")
    sys.exit(77)

synth, work, real_root, featurize = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]


def headers(path):
    """{key: (dtype str, rank, fortran_order)} read from each member's .npy header."""
    out = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            with z.open(name) as f:
                version = np.lib.format.read_magic(f)
                read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                               (2, 0): np.lib.format.read_array_header_2_0}[version]
                shape, fortran, dtype = read_header(f)
            out[name[:-4]] = (dtype.str, len(shape), fortran and len(shape) > 1)
    return out


def reference(kind):
    """The header signature shared by every real file of a kind ('layout' or 'tile')."""
    sigs = [headers(p) for p in sorted(glob.glob(os.path.join(real_root, "npz", kind, "**", "*.npz"),
                                              recursive=True))]
    assert sigs, f"no real {kind} files under {real_root}"
    for s in sigs[1:]:
        assert s == sigs[0], f"real {kind} files disagree: {s} vs {sigs[0]}"
    return sigs[0]


def check_edges(path, d):
    e = d["edge_index"]
    n = d["node_feat"].shape[0]
    assert (e[:, 0] > e[:, 1]).all(), f"{path}: an edge [u, v] with u <= v"
    assert (np.lexsort((e[:, 1], e[:, 0])) == np.arange(len(e))).all(), f"{path}: edges not sorted by (u, v)"
    assert len(np.unique(e, axis=0)) == len(e), f"{path}: duplicate edges"
    assert e.size == 0 or (e.min() >= 0 and e.max() < n), path


shutil.rmtree(work, ignore_errors=True)
subprocess.run([synth, "--out", work, "--preset", "tiny", "--seed", "3"], check=True, stdout=subprocess.DEVNULL)

real = {kind: reference(kind) for kind in ("layout", "tile")}
checked = 0
for kind, pattern in (("layout", "npz/layout/*/*/*/*.npz"), ("tile", "npz/tile/xla/*/*.npz")):
    for path in sorted(glob.glob(os.path.join(work, pattern))):
        assert headers(path) == real[kind], f"{path}: {headers(path)}\n  real {kind} files: {real[kind]}"
        d = np.load(path)
        check_edges(path, d)
        n = d["node_feat"].shape[0]
        if kind == "layout":
            nc, c = d["node_config_ids"].shape[0], d["config_runtime"].shape[0]
            assert d["node_feat"].shape == (n, 140) and d["node_config_feat"].shape == (c, nc, 18), path
            assert set(np.unique(d["node_opcode"][d["node_config_ids"]])) <= {26, 34, 75}, path
            assert d["node_config_feat"].min() >= -1 and d["node_config_feat"].max() <= 5, path
            s = d["node_splits"]
            assert s.shape[0] == 1 and s[0, 0] == 0 and s[0, -1] == n and (np.diff(s[0]) >= 0).all(), (path, s)
        else:
            c = d["config_runtime"].shape[0]
            assert d["config_feat"].shape == (c, 24) and d["config_runtime_normalizers"].shape == (c,), path
        assert (d["node_feat"][:, 1] == 0).all(), f"{path}: node_feat[:, 1] is always 0 in real files"
        checked += 1
assert checked == 30, checked

# tgraph-featurize: the raw tuning data of unet_3d -> the dataset's file, as numpy sees it.
out = os.path.join(work, "unet.npz")
subprocess.run([featurize, "layout", "--in", os.path.join(real_root, "module_tuning_data_layout.pb"), "--out", out],
               check=True, stdout=subprocess.DEVNULL)
assert headers(out) == real["layout"], headers(out)
mine, theirs = np.load(out), np.load(os.path.join(real_root, "npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz"))
for key in ("node_feat", "node_opcode", "edge_index", "node_config_ids", "node_splits"):
    assert np.array_equal(mine[key], theirs[key]), key
rows = {r.tobytes(): t for r, t in zip(theirs["node_config_feat"], theirs["config_runtime"])}
assert all(rows.get(r.tobytes()) is not None for r in mine["node_config_feat"])
assert mine["node_config_feat"].shape == (112, 62, 18)
shutil.rmtree(work)
print(f"numpy.load: {checked} generated files match the real files' keys, dtypes, ranks and orders; "
      "tgraph-featurize reproduces unet_3d")
