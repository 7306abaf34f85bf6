"""top_k="auto": the stop rule's arithmetic against an independent computation, and Triton's
own Autotuner measuring until sure with a benchmark function of the test's own and a
model order the test chooses (a stand-in client: no server). Run by ctest (triton_pruner)."""
import itertools
import math
import sys

import numpy as np
import pytest

try:
    import triton
    import triton.language as tl
    import tgraph.triton as tt
except ImportError as e:
    pytest.fail(f"{e.name} is missing from {sys.executable}: run scripts/install-deps --test", pytrace=False)

from tgraph._stop_rule import StopRule

from standin import StandIn, Tensor, name


def expected_better_by_numpy(rule, zs, ms, others):
    """The rule's sum, computed another way: the slope's prior as one more weighted
    observation in a least-squares fit of the centred data, the same two noise rounds."""
    y, z = np.log(ms), np.asarray(zs, float)
    zc, yc = z - z.mean(), y - y.mean()
    sigma2 = rule.noise ** 2
    for _ in range(2):
        w = sigma2 / rule.slope_sd ** 2  # the prior's weight in units of one observation
        b = (zc @ yc + w * rule.slope) / (zc @ zc + w)
        rss = float(((yc - b * zc) ** 2).sum())
        sigma2 = (rule.noise_weight * rule.noise ** 2 + rss) / (rule.noise_weight + len(y))
    var_b = sigma2 / (zc @ zc + sigma2 / rule.slope_sd ** 2)
    total = 0.0
    for o in others:
        mean = y.mean() + b * (o - z.mean())
        sd = math.sqrt(sigma2 * (1 + 1 / len(y)) + var_b * (o - z.mean()) ** 2)
        total += 0.5 * math.erfc((mean - (y.min() - math.log(1 + rule.tolerance))) / (sd * math.sqrt(2)))
    return total


def test_the_expected_count_of_better_candidates_matches_an_independent_computation():
    rule = StopRule()
    cases = [([0.0, 1.0], [1.0, math.exp(0.5)], [2.0, 3.0, 5.0]),
             ([-1.2, -0.3, 0.4], [0.02, 0.019, 0.03], [0.5, 0.6, 1.9, 2.0]),
             ([0.0, 0.1], [2.0, 1.0], [0.2, 0.3])]
    for zs, ms, others in cases:
        assert rule.expected_better(zs, ms, others) == pytest.approx(expected_better_by_numpy(rule, zs, ms, others),
                                                                     rel=1e-9)


def test_an_order_the_measurements_confirm_stops_and_one_they_contradict_goes_on():
    rule = StopRule()
    # Two measured, each as slow as the slope says; the rest far down the order.
    assert rule.stop([0.0, 1.0], [1.0, math.exp(0.5)], [3.0, 4.0, 5.0])
    # The second measured is twice as fast as the first: the order is wrong here, and the
    # next candidates (scores 1.1, 1.2) could be faster still.
    assert not rule.stop([0.0, 1.0], [2.0, 1.0], [1.1, 1.2, 3.0])
    # Before min_k measurements it never stops while candidates remain; after them with
    # none left it does.
    assert not rule.stop([0.0], [1.0], [9.0])
    assert rule.stop([0.0, 1.0], [1.0, 2.0], [])
    # A hundred candidates scored just below the measured ones: each has a chance.
    assert rule.expected_better([0.0, 0.01], [1.0, 1.0], [0.02] * 100) > 10


def test_a_bad_rule_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="StopRule.noise: a number > 0"):
        StopRule(noise=0)
    with pytest.raises(ValueError, match="StopRule.min_k: a count >= 1"):
        StopRule(min_k=0)
    with pytest.raises(ValueError, match='top_k: a count of configurations >= 1, or "auto"'):
        tt.Pruner("tile@x", top_k="all", client=object())
    with pytest.raises(ValueError, match="max_k: a count of configurations >= 1"):
        tt.Pruner("tile@x", top_k="auto", max_k=0, client=object())


# --- inside Triton's Autotuner ------------------------------------------------------
@triton.jit
def gemm(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
         BLOCK_SIZE_K: tl.constexpr):
    tl.store(c_ptr + tl.arange(0, BLOCK_SIZE_M), tl.load(a_ptr + tl.arange(0, BLOCK_SIZE_M)))


TILES = [(m, n, k, w, s) for m, n, k, w, s in itertools.product((32, 64, 128, 256), (32, 64, 128, 256), (32, 64),
                                                                   (4, 8), (3,))]  # 64 candidates


def space_configs():
    return [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k}, num_warps=w, num_stages=s)
            for m, n, k, w, s in TILES]


def autotune(times_ms, scores, configs=None, prune=True, **options):
    """Triton's Autotuner over TILES (`configs`: the Config objects to use), pruned with
    top_k="auto" by a model whose scores are `scores` (prune=False: Triton alone); the
    benchmark returns times_ms of the configuration launched. Returns what was launched
    to benchmark, what Triton chose and the pruner."""
    configs = configs or space_configs()
    order = sorted(TILES, key=lambda t: scores[t])
    pruner = tt.Pruner("tile@test", top_k="auto", report=False,
                       client=StandIn([name(t) for t in order], [scores[t] for t in order]), **options)
    launched = []

    class Launch:
        fn, arg_names = gemm, gemm.arg_names

        def run(self, *args, **kw):
            launched.append((kw["BLOCK_SIZE_M"], kw["BLOCK_SIZE_N"], kw["BLOCK_SIZE_K"], kw["num_warps"],
                             kw["num_stages"]))

    def do_bench(kernel_call, quantiles):
        kernel_call()
        t = times_ms[launched[-1]]
        return [t, t, t]

    autotuner = triton.autotune(configs=configs, key=["M", "N", "K"], do_bench=do_bench,
                                prune_configs_by={"early_config_prune": pruner} if prune else None)(Launch())
    autotuner[(1,)](Tensor("torch.bfloat16", 512, 256), Tensor("torch.bfloat16", 256, 1024),
                    Tensor("torch.bfloat16", 512, 1024), 512, 1024, 256)
    chosen = launched[-1]
    return launched[:-1], chosen, pruner


def test_a_model_the_measurements_confirm_measures_few_and_the_rest_are_never_launched():
    # Scores 0.1 apart; each candidate 5% slower than the one before: the model is right.
    scores = {t: 0.1 * i for i, t in enumerate(TILES)}
    times = {t: 0.01 * 1.05 ** i for i, t in enumerate(TILES)}
    benched, chosen, pruner = autotune(times, scores)
    assert benched == TILES[:len(benched)]  # in the model's order
    assert 2 <= len(benched) <= 4
    assert chosen == TILES[0]
    assert pruner.stats["auto_measured"] == len(benched)
    assert pruner.stats["auto_skipped"] == 20 - len(benched)  # max_k 20 kept, the rest skipped unlaunched


def test_a_model_the_measurements_contradict_measures_up_to_max_k_and_finds_the_fastest_there():
    # The same scores, but the times fall along the model's order: each next one faster.
    scores = {t: 0.1 * i for i, t in enumerate(TILES)}
    times = {t: 0.01 * 0.97 ** i for i, t in enumerate(TILES)}
    benched, chosen, pruner = autotune(times, scores, max_k=12)
    assert benched == TILES[:12]
    assert chosen == TILES[11]
    assert len(benched) <= len(TILES)  # never more than Triton alone
    assert pruner.stats["auto_skipped"] == 0


def test_a_model_that_cannot_tell_its_top_candidates_apart_measures_more_of_them():
    # Forty candidates with nearly one score and random times within 10%: the rule cannot
    # be sure after two, so it measures more than it does for a confident model.
    rng = np.random.default_rng(0)
    scores = {t: (0.001 * i if i < 40 else 5 + i) for i, t in enumerate(TILES)}
    times = {t: 0.01 * (1 + 0.1 * rng.random()) for t in TILES}
    benched, chosen, _ = autotune(times, scores)
    assert len(benched) >= 8
    assert times[chosen] == min(times[t] for t in benched)


def test_another_autotuner_sharing_the_configs_measures_every_one_after_an_auto_tuning():
    # Kernels often share one CONFIGS list: the stop rule of one tuning must not reach
    # the next autotuner's benchmarks of the same Config objects.
    scores = {t: 0.1 * i for i, t in enumerate(TILES)}
    times = {t: 0.01 * 1.05 ** i for i, t in enumerate(TILES)}
    configs = space_configs()
    benched, _, pruner = autotune(times, scores, configs=configs)
    assert pruner.stats["auto_skipped"] > 0
    alone, chosen, _ = autotune(times, scores, configs=configs, prune=False)
    assert len(alone) == len(TILES)
    assert chosen == TILES[0]
