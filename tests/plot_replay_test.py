#!/usr/bin/env python3
"""scripts/plot-replay: draws a PNG from tgraph-client replay --csv output, with and
without the fine-tuned curve, and refuses a file that is not replay output, naming it.
Usage: plot_replay_test.py PLOT_REPLAY WORKDIR. Fails (saying what to install) without
matplotlib: scripts/install-deps --test installs it."""
import os
import sys

from plot_test_util import check_common_refusals, check_png, fresh_workdir, run

HEADER = "round,measured,random_search,frozen_model,random_search_rank,frozen_model_rank"


def main():
    tool, work = sys.argv[1:3]
    if not fresh_workdir(work):
        return 1
    frozen = os.path.join(work, "frozen.csv")
    with open(frozen, "w") as f:
        f.write(HEADER + "\n1,10,1.5,1.2,30.5,12\n2,20,1.2,1.0,10.0,0\n3,30,1.1,1.0,4.0,0\n")
    updated = os.path.join(work, "updated.csv")
    with open(updated, "w") as f:
        f.write(HEADER + ",updated_model,updated_model_rank,updated_version\n"
                "1,10,1.5,1.2,30.5,12,1.2,12,1\n2,20,1.2,1.0,10.0,0,1.0,0,2\n")
    searched = os.path.join(work, "searched.csv")
    with open(searched, "w") as f:
        f.write(HEADER + ",search,search_rank\n1,10,1.5,1.2,30.5,12,1.1,3\n2,20,1.2,1.0,10.0,0,1.0,0\n")
    for name in ("frozen", "updated", "searched"):
        png = os.path.join(work, name + ".png")
        r = run(tool, os.path.join(work, name + ".csv"), png, "--title", name)
        assert r.returncode == 0, r.stderr
        check_png(png)
    check_common_refusals(tool, work, "replay --csv")
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
