"""An autotuner's loop with tgraph: rank, measure the best predicted, report.
Usage: python3 autotune.py SERVER GRAPH.npz (docs/python.md)."""
import sys

import tgraph

client = tgraph.Client(sys.argv[1])
graph = tgraph.load_graph(sys.argv[2])           # a file with its configurations (a module has none:
candidates = graph.configs                       # docs/python.md searches one); (c, nc, 18) layouts
measured = {}
for round in range(5):
    ranking = client.rank("layout:xla:random", graph, candidates)
    batch = [int(i) for i in ranking.order if int(i) not in measured][:8]   # best predicted, unmeasured
    runtimes = [int(graph.runtimes[i]) for i in batch]   # stand-in: measure these on hardware
    measured.update(zip(batch, runtimes))
    client.report_measurements("layout:xla:random", graph, candidates[batch], runtimes)  # for fine-tuning
    print(f"round {round}: best {min(measured.values())} ns after {len(measured)} measurements")
