"""top_k="auto" inside Triton's autotuner: one tuning's benchmarks follow the stop rule
(tgraph._stop_rule.StopRule). The Pruner starts a session for the autotuner it pruned for;
Triton's Autotuner._bench, wrapped once per process, asks it before each benchmark of
that autotuner, and a candidate the rule skips returns inf timings without its kernel
being compiled or launched. Every other autotuner's benchmarks, and every benchmark
outside a session, are Triton's own.

Threads: Triton benchmarks on the thread that pruned, so a session is thread-local.
"""
import threading
from typing import Dict

_local = threading.local()


class _Session:
    """One tuning's measurements under top_k="auto": which of the kept candidates have a
    model score, what was measured, and whether the rule said stop."""

    def __init__(self, pruner, record: dict, names: Dict[int, str], scores: Dict[str, float], autotuner):
        self.pruner, self.record, self.names = pruner, record, names
        self.autotuner = autotuner  # the one whose benchmarks it follows: Configs may be shared
        # Standardised over the model's whole order (mean 0, standard deviation 1), so the
        # rule's slope means the same whatever the model's scale (prior weight, share).
        values = list(scores.values())
        mean = sum(values) / max(1, len(values))
        sd = (sum((v - mean) ** 2 for v in values) / max(1, len(values))) ** 0.5 or 1.0
        self.scores = {n: (v - mean) / sd for n, v in scores.items()}
        self.measured = {}  # tile name -> fastest ms measured
        self.stopped = False
        self.listed = True  # whether the benchmark function answers a list (do_bench's quantiles)
        self.kept_ids = {id(c) for c in record["kept"]}
        record["auto"] = {"measured": [], "skipped": []}

    def bench(self, config, measure):
        name = self.names.get(id(config))
        if name is None:  # outside the model's space: always measured
            return measure()
        if not self.stopped and name not in self.measured:
            others = [z for n, z in self.scores.items() if n not in self.measured and n != name]
            done = list(self.measured)
            self.stopped = self.pruner.stop_rule.stop([self.scores[n] for n in done],
                                                      [self.measured[n] for n in done], others + [self.scores[name]])
        if self.stopped:
            self.pruner.stats["auto_skipped"] += 1
            self.record["auto"]["skipped"].append(config)
            # The type the measured ones have, so that Triton's min() compares like with like.
            return [float("inf")] * 3 if self.listed else float("inf")
        result = measure()
        self.listed = isinstance(result, (list, tuple))
        ms = result[0] if self.listed else result
        self.pruner.stats["auto_measured"] += 1
        self.record["auto"]["measured"].append(config)
        if isinstance(ms, (int, float)) and 0 < ms < float("inf"):
            self.measured[name] = min(ms, self.measured.get(name, float("inf")))
        return result


def begin(pruner, record: dict, names: Dict[int, str], scores: Dict[str, float], autotuner):
    """Makes `autotuner`'s next benchmarks on this thread follow the stop rule: `names`
    maps the kept Configs' ids to their tile names, `scores` every tile of the model's
    order to its score."""
    _install_bench_hook()
    _local.session = _Session(pruner, record, names, scores, autotuner)


def end():
    """Ends this thread's session, if any."""
    _local.session = None


def _install_bench_hook():
    from triton.runtime.autotuner import Autotuner
    original = Autotuner._bench
    if getattr(original, "tgraph_original", None) is not None:
        return

    def _bench(self, *args, config, **meta):
        session = getattr(_local, "session", None)
        if session is None or session.autotuner is not self or id(config) not in session.kept_ids:
            return original(self, *args, config=config, **meta)
        return session.bench(config, lambda: original(self, *args, config=config, **meta))

    _bench.tgraph_original = original
    Autotuner._bench = _bench
