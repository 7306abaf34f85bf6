"""A GPU kernel's tile autotuning loop with tgraph: search, measure the first proposal,
search again with every measured configuration and its runtime (the model's prior
follows them). Usage: python3 tile_loop.py SERVER KERNEL.npz [COLLECTION]
(a tile file whose runtimes stand in for the GPU; docs/python.md)."""
import sys

import numpy as np
import tgraph

if len(sys.argv) not in (3, 4):
    sys.exit(__doc__)
client = tgraph.Client(sys.argv[1])
collection = sys.argv[3] if len(sys.argv) > 3 else "tile@h100-triton"
kernel = tgraph.load_graph(sys.argv[2])        # one matrix product; its (c, 24) rows and runtimes
fastest = int(kernel.runtimes.min())           # known here only because every row was measured
rows, runtimes = [], []
while True:
    p = client.search_tiles(collection, kernel, results=1,
                            exclude=np.array(rows) if rows else None,
                            exclude_runtimes_ns=runtimes or None)
    row = p.configs[0]
    at = int(np.flatnonzero((kernel.configs == row).all(axis=1))[0])
    rows.append(row)
    runtimes.append(int(kernel.runtimes[at]))  # stand-in: time this configuration on the GPU
    print(f"{len(rows)}: {p.tiles[0]} {runtimes[-1]} ns, {runtimes[-1] / fastest:.3f}x the fastest "
          f"(the prior followed {p.correction_measurements} measurements)")
    if runtimes[-1] <= 1.01 * fastest:
        break
