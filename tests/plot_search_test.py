#!/usr/bin/env python3
"""scripts/plot-search: the curves' median and range over runs (hand-computed), a PNG
from tgraph-bench-search --csv output, and precise refusals of what is not such output.
Usage: plot_search_test.py PLOT_SEARCH WORKDIR. Fails (saying what to install) without
matplotlib: scripts/install-deps --test installs it."""
import importlib.machinery
import importlib.util
import os
import sys

from plot_test_util import check_common_refusals, check_png, fresh_workdir, run

# The header tgraph-bench-search --csv writes (model/bench/bench_search_main.cc).
HEADER = "strategy,graph,repeat,measured,gap"


def load(tool):
    loader = importlib.machinery.SourceFileLoader("plot_search", tool)
    spec = importlib.util.spec_from_loader("plot_search", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def write(path, lines):
    with open(path, "w") as f:
        f.write("\n".join([HEADER] + lines) + "\n")


def main():
    tool, work = sys.argv[1:3]
    if not fresh_workdir(work):
        return 1
    m = load(tool)
    good = os.path.join(work, "farm.csv")
    # The default measures once (0.1); two genetic runs of 3 measurements; a tgraph run.
    write(good, ["default,g1,0,1,0.1",
                 "genetic,g1,0,1,0.2", "genetic,g1,0,2,0.1", "genetic,g1,0,3,0.05",
                 "genetic,g2,0,1,0.3", "genetic,g2,0,2,0.3", "genetic,g2,0,3,0.0",
                 "tgraph,g1,0,1,0.1", "tgraph,g1,0,2,0.02", "tgraph,g1,0,3,0.01"])
    curves = m.read_curves(good)
    assert sorted(curves) == ["default", "genetic", "tgraph"], curves
    median, low, high = m.summary(curves["genetic"], 3)
    assert [round(v, 9) for v in median] == [25.0, 20.0, 2.5], median
    assert [round(v, 9) for v in low] == [20.0, 10.0, 0.0], low
    assert [round(v, 9) for v in high] == [30.0, 30.0, 5.0], high
    median, _, _ = m.summary(curves["default"], 3)  # kept after its one measurement
    assert [round(v, 9) for v in median] == [10.0, 10.0, 10.0], median
    png = os.path.join(work, "farm.png")
    r = run(tool, good, png, "--title", "farm")
    assert r.returncode == 0, r.stderr
    check_png(png)
    # Refusals name the file (and the line).
    check_common_refusals(tool, work, "bench-search --csv")
    gap = os.path.join(work, "gap.csv")
    write(gap, ["genetic,g1,0,1,0.2", "genetic,g1,0,3,0.1"])
    r = run(tool, gap, os.path.join(work, "gap.png"))
    assert r.returncode == 1 and "gap.csv: line 3: measured 3 does not follow 1" in r.stderr, r.stderr
    text = os.path.join(work, "text.csv")
    write(text, ["genetic,g1,0,one,0.2"])
    r = run(tool, text, os.path.join(work, "text.png"))
    assert r.returncode == 1 and "text.csv: line 2: measured must be an integer" in r.stderr, r.stderr
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
