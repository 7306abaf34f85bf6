"""What joining the store costs a search: a server with a measurement store, reports of
10 rows each of a real layout graph, searches timed with and without
include_stored_measurements. Usage: bench.py BUILD_DIR REGISTRY (a registry with a
layout:xla:random model); run from the repository root."""
import os, subprocess, sys, time, shutil, statistics
import numpy as np
BUILD, REGISTRY = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(BUILD, "client", "python"))
import tgraph
store = os.path.abspath("join-bench-store"); shutil.rmtree(store, ignore_errors=True)
srv = subprocess.Popen([os.path.join(BUILD, "server", "tgraph-server"), "--registry", REGISTRY, "--measurement_store", store,
                        "--address", "127.0.0.1:50077", "--metrics_address", ""], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    c = tgraph.Client("127.0.0.1:50077")
    for name in ["valid/unet_3d.4x4.bf16.npz", "test/cd708819d3f5103afd6460b15e74eaf3.npz"]:
        g = tgraph.load_graph("tests/data/real/npz/layout/xla/random/" + name)
        _, first = np.unique(g.configs.reshape(len(g.configs), -1), axis=0, return_index=True)
        rows = g.configs[np.sort(first)]
        def timed(stored):
            ts = []
            for seed in range(3):
                t = time.perf_counter()
                p = c.search("layout:xla:random", g, results=10, max_evaluations=256, seed=seed, include_stored=stored)
                ts.append(time.perf_counter() - t)
            return statistics.median(ts), p
        timed(False)  # warm: registration, tensors
        for reports in (0, 8, 64):
            have = len([f for d, _, fs in os.walk(store) for f in fs])
            for r in range(have, reports):
                sel = rows[(r * 10) % (len(rows) - 10):][:10]
                c.report_measurements("layout:xla:random", g, sel, [1_000_000 + 1000 * r + i for i in range(10)])
            off, _ = timed(False); on, p = timed(True)
            print(f"{name}: nc {rows.shape[1]}, {reports} reports of 10 rows: search {off*1000:.0f} ms without the join, "
                  f"{on*1000:.0f} ms with it ({p.stored_measurements} rows joined)", flush=True)
        shutil.rmtree(store, ignore_errors=True); os.makedirs(store)
finally:
    srv.terminate(); srv.wait()
    shutil.rmtree(store, ignore_errors=True)
