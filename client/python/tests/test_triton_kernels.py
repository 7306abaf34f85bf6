"""tgraph.triton prunes only what it can prove is a matrix product: kernels users bring
(attention-like 3-D operands, sizes that disagree with the operands, a softmax with one
block size, numpy integers for M, N, K) run through Triton's own Autotuner with a
stand-in client (the model's order is the test's: no server). Each kernel that is not
provably a GEMM keeps every candidate, with one warning naming the reason and a hint
that fits it. Run by ctest (python_client)."""
import itertools
import sys
import warnings

import numpy as np
import pytest

try:
    import triton
    import triton.language as tl
    import tgraph.triton as tt
except ImportError as e:
    pytest.fail(f"{e.name} is missing from {sys.executable}: run scripts/install-deps --test", pytrace=False)

from standin import StandIn, Tensor, name


@triton.jit
def attention_kernel(q_ptr, k_ptr, o_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr):
    tl.store(o_ptr + tl.arange(0, BLOCK_M), tl.load(q_ptr + tl.arange(0, BLOCK_M)))


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    tl.store(c_ptr + tl.arange(0, BLOCK_M), tl.load(a_ptr + tl.arange(0, BLOCK_M)))


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr):
    tl.store(y_ptr + tl.arange(0, BLOCK_SIZE), tl.load(x_ptr + tl.arange(0, BLOCK_SIZE)))


TILES = list(itertools.product((32, 64, 128), (32, 64), (32, 64), (4, 8), (3,)))  # 24


def gemm_configs():
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k}, num_warps=w, num_stages=s)
            for m, n, k, w, s in TILES]


def client():
    return StandIn([name(t) for t in TILES], [float(i) for i in range(len(TILES))])


def tuner(jit_fn, configs, key, pruner):
    benched = []

    class Launch:
        fn, arg_names = jit_fn, jit_fn.arg_names

        def run(self, *args, **kw):
            pass

    def do_bench(kernel_call, quantiles):
        benched.append(1)
        return [1.0, 1.0, 1.0]

    prune = {"early_config_prune": pruner} if pruner else None
    return triton.autotune(configs=configs, key=key, do_bench=do_bench, prune_configs_by=prune)(Launch()), benched


def run_warned(call):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in said if issubclass(w.category, RuntimeWarning)]


def test_an_attention_like_kernel_with_3d_operands_and_integer_sizes_keeps_every_candidate_with_one_warning():
    pruner = tt.Pruner("tile@test", top_k=3, report=False, client=client())
    autotuner, benched = tuner(attention_kernel, gemm_configs(), ["M", "N", "K"], pruner)
    said = run_warned(lambda: [autotuner[(1,)](Tensor("torch.bfloat16", 8, 1024, 64), Tensor("torch.bfloat16", 8, 1024, 64),
                                               Tensor("torch.bfloat16", 8, 1024, 64), 1024, 1024, s) for s in (64, 128)])
    assert len(benched) == 2 * len(TILES)  # two keys, every candidate of each
    assert len(said) == 1, said  # one warning per kernel and reason
    assert "attention_kernel: every candidate is measured" in said[0]
    assert "its tensor arguments are not all matrices (q_ptr 8x1024x64" in said[0]
    assert "if it is not a matrix product there is nothing to do" in said[0]


def test_sizes_that_disagree_with_the_operands_are_not_pruned_and_the_hint_names_problem():
    stand_in = client()
    pruner = tt.Pruner("tile@test", top_k=3, report=False, client=stand_in)
    autotuner, benched = tuner(matmul_kernel, gemm_configs(), ["M", "N", "K"], pruner)
    said = run_warned(lambda: autotuner[(1,)](Tensor("torch.bfloat16", 512, 64), Tensor("torch.bfloat16", 64, 1024),
                                              Tensor("torch.bfloat16", 512, 1024), 1024, 1024, 64))
    assert len(benched) == len(TILES)
    assert "its arguments M=1024, N=1024, K=64 disagree with its tensors A 512x64 and B 64x1024" in said[0]
    assert "give problem=" in said[0]
    assert stand_in.searches == []  # nothing asked of the server for a problem not proven


def test_numpy_and_python_integer_sizes_that_agree_with_the_operands_are_pruned_alike():
    for m, n, k in ((np.int64(512), np.int32(1024), np.int64(64)), (512, 1024, 64)):
        stand_in = client()
        pruner = tt.Pruner("tile@test", top_k=3, report=False, client=stand_in)
        autotuner, benched = tuner(matmul_kernel, gemm_configs(), ["M", "N", "K"], pruner)
        said = run_warned(lambda: autotuner[(1,)](Tensor("torch.bfloat16", 512, 64), Tensor("torch.bfloat16", 64, 1024),
                                                  Tensor("torch.bfloat16", 512, 1024), m, n, k))
        assert said == []
        assert len(benched) == 3
        assert pruner.last["problem"] == tt.Problem(512, 1024, 64, "bf16")
        assert stand_in.searches == ["gemm_bf16_512x1024x64"]


def test_a_softmax_kernel_with_one_block_size_is_left_to_triton_as_no_matrix_product():
    configs = [triton.Config({"BLOCK_SIZE": b}, num_warps=w) for b in (256, 512, 1024) for w in (4, 8)]
    pruner = tt.Pruner("tile@test", top_k=3, report=False, client=client())
    autotuner, benched = tuner(softmax_kernel, configs, ["n"], pruner)
    said = run_warned(lambda: autotuner[(1,)](Tensor("torch.float32", 4096), Tensor("torch.float32", 4096), 4096))
    assert len(benched) == len(configs)
    assert "its configurations have no BLOCK_M" in said[0]
    assert "if it is not a matrix product there is nothing to do" in said[0]


def test_install_never_prunes_a_kernel_it_cannot_identify():
    pruner = tt.install("tile@test", top_k=3, report=False, client=client())
    try:
        attention, attention_benched = tuner(attention_kernel, gemm_configs(), ["M", "N", "K"], None)
        gemm, gemm_benched = tuner(matmul_kernel, gemm_configs(), ["M", "N", "K"], None)
        said = run_warned(lambda: attention[(1,)](Tensor("torch.bfloat16", 8, 1024, 64),
                                                  Tensor("torch.bfloat16", 8, 1024, 64),
                                                  Tensor("torch.bfloat16", 8, 1024, 64), 1024, 1024, 64))
        gemm[(1,)](Tensor("torch.bfloat16", 512, 64), Tensor("torch.bfloat16", 64, 1024),
                   Tensor("torch.bfloat16", 512, 1024), 512, 1024, 64)
    finally:
        tt.uninstall()
    assert len(attention_benched) == len(TILES) and len(said) == 1
    assert len(gemm_benched) == 3
    assert pruner.stats["fallbacks"] == 1


def test_a_kernels_identity_survives_comments_docstrings_and_blank_lines_and_changes_with_any_token():
    base = ("def kernel(a_ptr, M, BLOCK_M: tl.constexpr):\n"
            "    pid = tl.program_id(0)\n"
            "    tl.store(a_ptr + pid, M)\n")
    edited = ('def kernel(a_ptr, M, BLOCK_M: tl.constexpr):  # the tile\n'
              '    """Stores M."""\n'
              '\n'
              '    # which program\n'
              '    pid = tl.program_id(0)   \n'
              '    tl.store(a_ptr + pid, M)  # done\n')
    assert tt.code_digest(base) == tt.code_digest(edited)
    for changed in (base.replace("pid, M", "pid, M + 1"), base.replace("program_id(0)", "program_id(1)"),
                    base.replace("pid", "p"), base.replace("    tl.store", "    s = 'x'\n    tl.store")):
        assert tt.code_digest(changed) != tt.code_digest(base), changed
    # Through Triton: a jitted kernel's identity is its code's, with its name.
    assert tt.kernel_of(matmul_kernel).source_hash == tt.code_digest(matmul_kernel.src)[:16]
    assert tt.kernel_of(matmul_kernel).name == "matmul_kernel"


class Unreachable(StandIn):
    def report_measurements(self, *args, **kwargs):
        raise ConnectionError("the store is away")


def test_a_report_that_fails_says_the_measurements_were_not_reported_and_is_no_pruning_fallback():
    stand_in = Unreachable([name(t) for t in TILES], [float(i) for i in range(len(TILES))])
    pruner = tt.Pruner("tile@test", top_k=3, report=True, client=stand_in)
    autotuner, benched = tuner(matmul_kernel, gemm_configs(), ["M", "N", "K"], pruner)

    def tune():
        autotuner[(1,)](Tensor("torch.bfloat16", 512, 64), Tensor("torch.bfloat16", 64, 1024),
                        Tensor("torch.bfloat16", 512, 1024), 512, 1024, 64)
        assert tt.flush(10)

    said = run_warned(tune)
    assert len(benched) == 3
    assert pruner.stats["fallbacks"] == 0 and pruner.stats["report_errors"] == 1
    assert len(said) == 1, said
    assert ("matmul_kernel: the measurements of bf16 512x1024x64 were not reported (ConnectionError: the store is "
            "away); the tuning is unaffected") in said[0]
    assert "every candidate is measured" not in said[0]
