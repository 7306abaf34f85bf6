#!/usr/bin/env python3
"""scripts/additivity: on hand-built files, an additive runtime is fitted exactly
(R^2 1, tau 1, lock-step groups counted once) and an interaction between two decisions
is not; on the real unet_3d file, the runtime is additive in its 22 independent
decisions down to the measurement noise; tile files and hidden runtimes are refused.
Usage: additivity_test.py ADDITIVITY WORKDIR REAL_ROOT. Exits 77 (skipped) when numpy
is not installed."""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed: skipped")
    sys.exit(77)


def write_layout(path, config_feat, runtime):
    n = config_feat.shape[1]
    np.savez(path, node_config_feat=config_feat.astype(np.int8), config_runtime=runtime.astype(np.int64),
             node_config_ids=np.arange(n, dtype=np.int64))


def run(tool, *args, ok=True):
    p = subprocess.run([sys.executable, tool, *args], capture_output=True, text=True)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


def main():
    tool, work, real = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.default_rng(1)
    c = 400
    # Three configurable nodes; node 0's output group and node 1's input group move in
    # lock step (one independent decision); node 2's kernel group is free.
    a = rng.integers(0, 2, c)
    b = rng.integers(0, 2, c)
    feat = np.full((c, 3, 18), -1)
    feat[:, 0, 0:2] = np.where(a[:, None] == 1, [3, 0], [0, 3])
    feat[:, 1, 6:8] = np.where(a[:, None] == 1, [3, 0], [0, 3])
    feat[:, 2, 12:14] = np.where(b[:, None] == 1, [2, 3], [3, 2])
    # Additive: runtime = 1e6 x 1.3^a x 1.1^b (log-additive), distinct per (a, b).
    additive = np.round(1e6 * 1.3 ** a * 1.1 ** b)
    write_layout(os.path.join(work, "additive.npz"), feat, additive)
    r = json.loads(run(tool, os.path.join(work, "additive.npz"), "--json").stdout)
    assert r["configs"] == c and r["decision_columns"] == 3 and r["independent_decisions"] == 2, r
    assert r["heldout_r2"] > 1 - 1e-9, r
    assert abs(r["heldout_tau"] - 1.0) < 1e-9, r
    # --fit_on: fitted on one file, another file of the same graph scored whole (its 4
    # distinct configurations, ranked exactly).
    write_layout(os.path.join(work, "other.npz"), feat[:50], additive[:50])
    r = json.loads(run(tool, os.path.join(work, "other.npz"), "--fit_on", os.path.join(work, "additive.npz"),
                       "--json").stdout)
    assert r["fitted_configs"] == c and r["configs"] == 50 and r["distinct_configs"] == 4, r
    assert abs(r["tau"] - 1.0) < 1e-9, r
    # An interaction: a copy only when a and b disagree. No sum of per-decision terms
    # fits it: the best additive fit explains none of a balanced XOR.
    xor = np.round(1e6 * (1.0 + 0.5 * (a != b)))
    write_layout(os.path.join(work, "xor.npz"), feat, xor)
    r = json.loads(run(tool, os.path.join(work, "xor.npz"), "--json").stdout)
    assert r["heldout_r2"] < 0.1, r

    # The real unet_3d file (random search): 169 decision columns, 22 independent; the
    # additive fit's residual is the size of the repeats' noise.
    unet = os.path.join(real, "npz/layout/xla/random/valid/unet_3d.4x4.bf16.npz")
    r = json.loads(run(tool, unet, "--json").stdout)
    assert r["configs"] == 481 and r["distinct_configs"] == 442, r
    assert r["decision_columns"] == 169 and r["independent_decisions"] == 22, r
    assert r["heldout_r2"] > 0.999, r
    assert r["heldout_residual_std"] < 3 * r["repeat_noise_std"], r

    # Refusals name the file.
    tile = os.path.join(real, "npz/tile/xla/train/retinanet.2x2.fp32_-342c949e14733d96.npz")
    p = run(tool, tile, ok=False)
    assert p.returncode == 1 and "retinanet" in p.stderr and "node_config_feat" in p.stderr, p.stderr
    hidden = os.path.join(real, "npz/layout/xla/random/test/cd708819d3f5103afd6460b15e74eaf3.npz")
    p = run(tool, hidden, ok=False)
    assert p.returncode == 1 and "cd708819" in p.stderr and "hidden" in p.stderr, p.stderr
    p = run(tool, unet, "--train", "1.5", ok=False)
    assert p.returncode == 2, p.stderr
    print("ok")


if __name__ == "__main__":
    main()
