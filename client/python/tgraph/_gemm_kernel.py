"""The Triton matrix product the shipped tile sets timed (tests/data/real/gpu-tiles), its
288 candidates, and how one candidate is launched: what tgraph.measure_tiles times on a
GPU and scripts/gpu-check-triton autotunes. Imports torch and triton: only where they are."""
import itertools

import torch
import triton
import triton.language as tl

# BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages: the shipped sets' 288 candidates.
CANDIDATES = list(itertools.product((32, 64, 128, 256), (32, 64, 128, 256), (32, 64, 128), (4, 8), (2, 3, 4)))
TORCH_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped ordering of the CTAs (GROUP_M rows of tiles at a time) for L2 reuse.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % per_group) % group_rows)
    pid_n = (pid % per_group) // group_rows
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    ks = tl.arange(0, BLOCK_K)
    a_at = a_ptr + rows[:, None] * sam + ks[None, :] * sak
    b_at = b_ptr + ks[:, None] * sbk + cols[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - step * BLOCK_K
        a = tl.load(a_at, mask=ks[None, :] < left, other=0.0)
        b = tl.load(b_at, mask=ks[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_at += BLOCK_K * sak
        b_at += BLOCK_K * sbk
    out_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + out_m[:, None] * scm + out_n[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(out_m[:, None] < M) & (out_n[None, :] < N))


def launch(a, b, c, candidate):
    """C = A B with one candidate (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)."""
    bm, bn, bk, warps, stages = candidate
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages)


def operands(m, n, k, dtype, seed=0):
    """Random A (M x K), B (K x N) and an empty C on the GPU."""
    torch.manual_seed(seed)
    t = TORCH_DTYPES[dtype]
    a = torch.randn(m, k, device="cuda").to(t)
    b = torch.randn(k, n, device="cuda").to(t)
    return a, b, torch.empty(m, n, device="cuda", dtype=t)


def time_ms(fn, loops_of: int = 3) -> float:
    """fn's time in ms (CUDA events): the median of `loops_of` timed loops of about 1 ms
    each, after a warm-up, as Triton's autotuner times candidates (inputs resident, L2 not
    flushed)."""
    fn()
    torch.cuda.synchronize()

    def loop(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / n

    n = max(1, min(50, int(1.0 / max(loop(1), 1e-3))))
    return sorted(loop(n) for _ in range(loops_of))[loops_of // 2]
