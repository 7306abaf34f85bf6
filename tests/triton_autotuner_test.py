"""Triton's own autotuner, from the Triton of the test environment (scripts/test-venv),
built and run without a GPU: the base the Triton integration starts from.

What needs a GPU driver, found here: only `triton.runtime.driver.active`, which Triton
reaches when it launches a kernel (JITFunction.run), when it benchmarks with its default
do_bench (driver.active.get_benchmarker()), and when cache_results keys its disk cache
(driver.active.get_current_target()). Decorating a kernel with @triton.jit and
@triton.autotune, pruning (early_config_prune, perf_model/top_k), benchmarking with a
do_bench of one's own, the per-key cache and knobs.autotuning.listener need none. So the
autotuner here wraps a real @triton.jit kernel in a stand-in whose launch records its
arguments instead of reaching the driver, and benchmarks with the test's own function.

Run by ctest (triton_autotuner) with pytest.
"""
import sys

import pytest

try:
    import triton
    import triton.language as tl
    from triton.runtime.autotuner import Autotuner
except ImportError as e:
    pytest.fail(f"{e.name} is missing from {sys.executable}: run scripts/install-deps --test (scripts/test-venv)",
                pytrace=False)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    rn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_SIZE_K):
        rk = k + tl.arange(0, BLOCK_SIZE_K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K))
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N))
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class Tensor:
    """What the autotuner reads of a tensor argument: its dtype (added to the key)."""

    def __init__(self, dtype):
        self.dtype = dtype


class RecordingLaunch:
    """Stands in for the kernel's launch: the autotuner calls run() for every benchmarked
    configuration and once with the chosen one; `fn` is the real JITFunction, so Triton
    finds the kernel (its name, the listener's fn) as it would."""

    def __init__(self, jit_fn):
        self.fn = jit_fn
        self.arg_names = jit_fn.arg_names
        self.launches = []

    def run(self, *args, **kwargs):
        self.launches.append(kwargs)


CONFIGS = [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": 64}, num_warps=w, num_stages=s)
           for m in (64, 128) for n in (64, 128) for w, s in ((4, 3), (8, 4))]


def fake_time(config):
    """A runtime (ms) the test knows for each configuration: 128x64, 8 warps is fastest."""
    kw = config.kwargs
    return 1.0 + abs(kw["BLOCK_SIZE_M"] - 128) / 64 + abs(kw["BLOCK_SIZE_N"] - 64) / 128 + (config.num_warps == 4) * 0.25


@pytest.fixture
def tuned():
    """The real autotuner over the kernel stand-in: a prune function keeping the 3
    configurations with the most warps and the largest BLOCK_SIZE_M, and a benchmark
    function returning fake_time of the configuration being launched."""
    calls = {"prune": [], "bench": []}
    launch = RecordingLaunch(matmul_kernel)

    def prune(configs, named_args, **kwargs):
        calls["prune"].append((len(configs), named_args["M"], named_args["N"], named_args["K"]))
        return sorted(configs, key=lambda c: (-c.num_warps, -c.kwargs["BLOCK_SIZE_M"], c.kwargs["BLOCK_SIZE_N"]))[:3]

    def do_bench(kernel_call, quantiles):
        kernel_call()  # launches (records) the configuration under test
        config = next(c for c in CONFIGS if all(launch.launches[-1].get(k) == v for k, v in c.all_kwargs().items()))
        calls["bench"].append(config)
        t = fake_time(config)
        return [t, t * 0.9, t * 1.1]

    autotuner = triton.autotune(configs=CONFIGS, key=["M", "N", "K"], prune_configs_by={"early_config_prune": prune},
                                do_bench=do_bench)(launch)
    return autotuner, launch, calls


def call(autotuner, m, n, k, dtype="torch.bfloat16"):
    a, b, c = Tensor(dtype), Tensor(dtype), Tensor(dtype)
    autotuner[(1, 1)](a, b, c, m, n, k)


def test_triton_builds_its_autotuner_over_a_jitted_kernel_without_a_gpu(tuned):
    autotuner, launch, _ = tuned
    assert isinstance(autotuner, Autotuner) and isinstance(matmul_kernel, triton.runtime.JITFunction)
    assert autotuner.arg_names == ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "BLOCK_SIZE_M", "BLOCK_SIZE_N",
                                   "BLOCK_SIZE_K"]
    assert autotuner.base_fn.__name__ == "matmul_kernel"
    assert len(autotuner.configs) == 8 and autotuner.configs[0].all_kwargs() == {
        "BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "num_warps": 4, "num_stages": 3, "num_ctas": 1}


def test_the_autotuner_prunes_once_per_key_benchmarks_only_the_survivors_and_launches_the_fastest(tuned):
    autotuner, launch, calls = tuned
    call(autotuner, 512, 256, 1024)
    assert calls["prune"] == [(8, 512, 256, 1024)]  # every candidate, once, with the kernel's arguments
    assert len(calls["bench"]) == 3 and len(launch.launches) == 4  # 3 benchmarked, then the chosen one
    best = min(calls["bench"], key=fake_time)
    assert best.kwargs == {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64} and best.num_warps == 8
    assert autotuner.best_config is best
    assert launch.launches[-1]["BLOCK_SIZE_M"] == 128 and launch.launches[-1]["num_warps"] == 8
    assert launch.launches[-1]["grid"] == (1, 1)
    # The same key again: cached, nothing pruned or benchmarked; another dtype is another key.
    call(autotuner, 512, 256, 1024)
    assert len(calls["prune"]) == 1 and len(calls["bench"]) == 3 and len(launch.launches) == 5
    call(autotuner, 512, 256, 1024, dtype="torch.float16")
    assert len(calls["prune"]) == 2 and len(calls["bench"]) == 6
    assert set(autotuner.cache) == {(512, 256, 1024, "torch.bfloat16", "torch.bfloat16", "torch.bfloat16"),
                                    (512, 256, 1024, "torch.float16", "torch.float16", "torch.float16")}


def test_one_survivor_of_the_prune_is_used_without_benchmarking(tuned):
    autotuner, launch, calls = tuned
    autotuner.early_config_prune = lambda configs, named_args, **kw: [configs[5]]
    call(autotuner, 64, 64, 64)
    assert calls["bench"] == [] and len(launch.launches) == 1
    assert autotuner.best_config is CONFIGS[5]


def test_the_listener_knob_receives_each_tunings_timings(tuned):
    autotuner, _, _ = tuned
    heard = []
    previous = triton.knobs.autotuning.listener
    triton.knobs.autotuning.listener = lambda **kw: heard.append(kw)
    try:
        call(autotuner, 1024, 1024, 1024)
        call(autotuner, 1024, 1024, 1024)  # cached: no new tuning
    finally:
        triton.knobs.autotuning.listener = previous
    assert len(heard) == 1
    (event,) = heard
    assert event["fn"] is matmul_kernel and event["key"][:3] == (1024, 1024, 1024)
    assert {c: t[0] for c, t in event["configs_timings"].items()} == {c: fake_time(c) for c in event["configs_timings"]}
    assert len(event["configs_timings"]) == 3 and event["best_config"] is autotuner.best_config


def test_an_empty_prune_is_refused_by_triton():
    launch = RecordingLaunch(matmul_kernel)
    autotuner = triton.autotune(configs=CONFIGS, key=["M"], prune_configs_by={"early_config_prune": lambda c, a, **k: []},
                                do_bench=lambda fn, quantiles: [1.0, 1.0, 1.0])(launch)
    with pytest.raises(Exception, match="No valid autotuner configs after pruning"):
        call(autotuner, 8, 8, 8)


def test_only_the_driver_needs_a_gpu():
    """Here (no GPU) the driver is the part that refuses; on a GPU machine it is found."""
    try:
        triton.runtime.driver.active.get_current_target()
    except RuntimeError as e:
        assert "active drivers" in str(e)
    else:
        pytest.skip("a GPU driver is present: nothing to show about its absence")
