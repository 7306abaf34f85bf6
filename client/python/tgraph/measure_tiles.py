"""Every tile candidate of a Triton matrix product timed on this machine's GPU over a grid
of shapes: the CSV `tgraph-featurize tiles` reads (the format of tests/data/real/gpu-tiles),
from which a tile model of your own GPU is trained (docs/tile-model.md).

    python -m tgraph.measure_tiles --out my_gpu.csv --grid 128,512,2048/256,1024/256,1024,4096 \\
        --dtypes bf16,f32 --repeats 3

Each problem (dtype, M, N, K of the grid's product) gets a cuBLAS row (torch.matmul, the
library anchor) and, for each of the 288 candidates (BLOCK_M, BLOCK_N, BLOCK_K in 32-256,
4 or 8 warps, 2-4 stages), `repeats` timed rows (the reader keeps their median) or one
"refused" row where Triton cannot compile it for the problem's kernel variant (its
dtype, and whether N and K are multiples of 16: compiled ahead once per variant, in
`--jobs` processes). Times are CUDA-event medians of three ~1 ms loops after a warm-up, as
Triton's autotuner measures; a candidate whose result is wrong (relative error > 5%) or
that fails at run time is left out and counted. The file is written as FILE.partial,
flushed after each problem and renamed when done (--budget S: stops after the problem
that passes S seconds, keeping whole problems); FILE.json beside it says what ran where.

`--stand_in` times nothing: made-up runtimes from the candidates' waves on an H100-like
GPU, for rehearsing the pipeline on a machine without one. Needs torch and triton
otherwise (a CUDA device)."""
import argparse
import itertools
import json
import math
import os
import sys
import time
import zlib
from typing import Iterable, List, Optional, Sequence, Tuple

CANDIDATES = list(itertools.product((32, 64, 128, 256), (32, 64, 128, 256), (32, 64, 128), (4, 8), (2, 3, 4)))
HEADER = "dtype,M,N,K,block_m,block_n,block_k,num_warps,num_stages,ms"
DEFAULT_GRID = "128,512,2048,8192/256,1024,4096/256,1024,4096"  # the shipped H100 set's 36 shapes
ELEMENT_BYTES = {"bf16": 2, "f16": 2, "f32": 4}

Shape = Tuple[int, int, int]


def parse_grid(text: str) -> List[Shape]:
    """"M,M/N,N/K,K" -> every (M, N, K) of the product; ValueError naming the part."""
    parts = text.split("/")
    if len(parts) != 3:
        raise ValueError(f"--grid {text!r}: expected M,M,.../N,N,.../K,K,... (three lists)")
    values = []
    for axis, part in zip("MNK", parts):
        try:
            vs = [int(v) for v in part.split(",") if v.strip()]
        except ValueError:
            raise ValueError(f"--grid {text!r}: the {axis} list {part!r} is not integers") from None
        if not vs or any(v < 1 for v in vs):
            raise ValueError(f"--grid {text!r}: the {axis} list {part!r} needs sizes >= 1")
        values.append(vs)
    return list(itertools.product(*values))


def variant(dtype: str, shape: Shape) -> Tuple[str, bool, bool]:
    """What decides which candidates compile: the dtype, and whether N and K are multiples of 16."""
    return dtype, shape[1] % 16 == 0, shape[2] % 16 == 0


class StandIn:
    """Made-up runtimes (no GPU): an H100-like GPU of 132 SMs whose candidates cost their
    waves of CTAs; shared memory past 227 KiB a CTA is refused as the compiler would."""
    stand_in = True

    def gpu(self) -> Tuple[str, str]:
        return "stand-in (no GPU: made-up times)", ""

    def refused(self, dtype: str, shape: Shape) -> set:
        b = ELEMENT_BYTES[dtype]
        return {c for c in CANDIDATES if c[4] * (c[0] + c[1]) * c[2] * b > 227 * 1024}

    def library_ms(self, dtype: str, shape: Shape) -> Optional[float]:
        m, n, k = shape
        return 0.005 + 2.0 * m * n * k / 7e11 * ELEMENT_BYTES[dtype] / 2

    def candidate_ms(self, dtype: str, shape: Shape, c, repeat: int) -> Tuple[float, bool]:
        m, n, k = shape
        bm, bn, bk, warps, stages = c
        ctas = math.ceil(m / bm) * math.ceil(n / bn)
        waves = math.ceil(ctas / 132)
        per_cta = 2.0 * bm * bn * k / (4e9 * (1 + 0.15 * (stages - 2)) * (1.1 if warps == 8 and bm * bn >= 16384 else 1))
        jitter = 1 + 0.01 * ((zlib.crc32(repr((dtype, shape, c, repeat)).encode()) % 7) / 7)  # the same in every process
        return 0.004 + waves * per_cta * ELEMENT_BYTES[dtype] / 2 * jitter, True


def _compile_chunk(args):
    """A worker's share of one variant's candidates: those Triton cannot compile (or launch)."""
    shape, dtype, chunk = args
    import torch
    from . import _gemm_kernel as gk
    m, n, k = shape
    t = gk.TORCH_DTYPES[dtype]
    a, b = torch.ones(m, k, dtype=t, device="cuda"), torch.ones(k, n, dtype=t, device="cuda")
    c = torch.empty(m, n, dtype=t, device="cuda")
    bad = []
    for cand in chunk:
        try:
            gk.launch(a, b, c, cand)
            torch.cuda.synchronize()
        except Exception:
            bad.append(cand)
    return bad


class CudaBench:
    """The GPU: torch and triton, the shipped sets' kernel (tgraph._gemm_kernel)."""
    stand_in = False

    def __init__(self, jobs: int):
        import torch
        if not torch.cuda.is_available():
            raise SystemExit("measure_tiles: PyTorch sees no CUDA device (--stand_in rehearses without one)")
        self.torch, self.jobs, self._refused, self._ops = torch, jobs, {}, None
        from . import _gemm_kernel
        self.gk = _gemm_kernel

    def gpu(self) -> Tuple[str, str]:
        major, minor = self.torch.cuda.get_device_capability()
        return self.torch.cuda.get_device_name(), f"{major}.{minor}"

    def compile_ahead(self, problems: Sequence[Tuple[str, Shape]]):
        import multiprocessing as mp
        first = {}
        for dtype, shape in problems:
            first.setdefault(variant(dtype, shape), (dtype, shape))
        work = [(shape, dtype, CANDIDATES[i::self.jobs]) for dtype, shape in first.values() for i in range(self.jobs)]
        with mp.get_context("spawn").Pool(self.jobs) as pool:
            found = pool.map(_compile_chunk, work)
        for (shape, dtype, _), bad in zip(work, found):
            self._refused.setdefault(variant(dtype, shape), set()).update(tuple(c) for c in bad)

    def refused(self, dtype: str, shape: Shape) -> set:
        return self._refused.get(variant(dtype, shape), set())

    def _operands(self, dtype, shape):
        if self._ops is None or self._ops[0] != (dtype, shape):
            a, b, c = self.gk.operands(*shape, dtype)
            self._ops = ((dtype, shape), a, b, c, self.torch.matmul(a.float(), b.float()))
        return self._ops[1:]

    def library_ms(self, dtype: str, shape: Shape) -> Optional[float]:
        a, b, _, _ = self._operands(dtype, shape)
        return self.gk.time_ms(lambda: self.torch.matmul(a, b))

    def candidate_ms(self, dtype: str, shape: Shape, cand, repeat: int) -> Tuple[float, bool]:
        a, b, c, ref = self._operands(dtype, shape)
        ms = self.gk.time_ms(lambda: self.gk.launch(a, b, c, cand))
        err = (c.float() - ref).abs().max().item() / (ref.abs().max().item() + 1e-6)
        return ms, err < 0.05


def measure(out: str, shapes: Iterable[Shape], dtypes: Sequence[str], *, repeats: int = 1,
            budget_s: Optional[float] = None, bench=None, progress=print) -> dict:
    """Writes `out` (and out.json); returns the summary written to out.json."""
    problems = [(dtype, shape) for shape in shapes for dtype in dtypes]
    started, t0 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.monotonic()
    if hasattr(bench, "compile_ahead"):
        bench.compile_ahead(problems)
        progress(f"compiled {len(CANDIDATES)} candidates for each kernel variant in {time.monotonic() - t0:.0f} s")
    summary = {"gpu": bench.gpu()[0], "compute_capability": bench.gpu()[1], "stand_in": bench.stand_in,
               "candidates": len(CANDIDATES), "repeats": repeats, "problems": len(problems), "measured": 0,
               "left_out": 0, "started_utc": started}
    partial = out + ".partial"
    with open(partial, "w") as f:
        f.write(HEADER + "\n")
        for dtype, shape in problems:
            if budget_s is not None and time.monotonic() - t0 > budget_s:
                progress(f"budget of {budget_s:.0f} s reached: {summary['measured']} of {len(problems)} problems")
                break
            m, n, k = shape
            lib = bench.library_ms(dtype, shape)
            if lib is not None:
                f.write(f"{dtype},{m},{n},{k},cublas,,,,,{lib:.6f}\n")
            refused = bench.refused(dtype, shape)
            for c in CANDIDATES:
                if c in refused:
                    f.write(f"{dtype},{m},{n},{k},{','.join(map(str, c))},refused\n")
            for r in range(repeats):  # rounds over every candidate: drift spreads over them all
                for c in CANDIDATES:
                    if c in refused:
                        continue
                    try:
                        ms, right = bench.candidate_ms(dtype, shape, c, r)
                    except Exception:
                        right = False
                    if not right:
                        summary["left_out"] += 1
                        continue
                    f.write(f"{dtype},{m},{n},{k},{','.join(map(str, c))},{ms:.6f}\n")
            f.flush()
            summary["measured"] += 1
            progress(f"{dtype} {m}x{n}x{k}: {len(CANDIDATES) - len(refused)} candidates x {repeats} "
                     f"({time.monotonic() - t0:.0f} s)")
    os.replace(partial, out)
    summary["seconds"] = round(time.monotonic() - t0, 1)
    with open(out + ".json", "w") as f:
        json.dump(summary, f, indent=1)
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tgraph.measure_tiles", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the CSV to write (FILE.json beside it)")
    p.add_argument("--grid", action="append", help=f"M,M/N,N/K,K: the shapes, their product (repeatable; "
                                                    f"default {DEFAULT_GRID})")
    p.add_argument("--dtypes", default="bf16,f32", help="bf16, f16 and/or f32 (default bf16,f32)")
    p.add_argument("--repeats", type=int, default=1, help="timed rows per candidate (the reader's median; default 1)")
    p.add_argument("--budget", type=float, default=None, help="seconds; stops after the problem that passes it")
    p.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1), help="compiling processes")
    p.add_argument("--stand_in", action="store_true", help="made-up times, no GPU: rehearsals only")
    a = p.parse_args(argv)
    try:
        shapes = [s for g in (a.grid or [DEFAULT_GRID]) for s in parse_grid(g)]
    except ValueError as e:
        p.error(str(e))
    dtypes = [d.strip() for d in a.dtypes.split(",") if d.strip()]
    if not dtypes or set(dtypes) - set(ELEMENT_BYTES):
        p.error(f"--dtypes {a.dtypes!r}: a list of bf16, f16, f32")
    if a.repeats < 1 or a.jobs < 1:
        p.error("--repeats and --jobs are counts >= 1")
    bench = StandIn() if a.stand_in else CudaBench(a.jobs)
    s = measure(a.out, shapes, dtypes, repeats=a.repeats, budget_s=a.budget, bench=bench,
                progress=lambda line: print(line, file=sys.stderr, flush=True))
    gpu = "NVIDIA H100 80GB HBM3" if bench.stand_in else s["gpu"]  # the stand-in's times are an H100's waves
    print(f"{a.out}: {s['measured']} of {s['problems']} problems, {s['candidates']} candidates each, on "
          f"{s['gpu']}{' (' + s['compute_capability'] + ')' if s['compute_capability'] else ''}; next: "
          f"tgraph-featurize tiles --csv {a.out} --gpu '{gpu}' --name NAME --out_root DATA")
    return 0


if __name__ == "__main__":
    sys.exit(main())
