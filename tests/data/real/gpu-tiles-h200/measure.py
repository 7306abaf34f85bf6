"""Every tile configuration of the data set's Triton kernel on new shapes, measured the way
triton_tiles.py measured the H100 set (its kernel, candidates and timing, imported), with
the kernels compiled ahead in parallel for each divisibility pattern of the shapes.
Usage: measure.py OUT BUDGET_S GRID [GRID ...], GRID as M,M/N,N/K,K."""
import itertools, multiprocessing as mp, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu-tiles"))  # its kernel and timing
import torch
import triton_tiles as tt

def pattern(shape):
    return tuple(v % 16 == 0 for v in shape)

def compile_for(args):
    shape, jobs = args
    M, N, K = shape; bad = []
    for dt, cfg in jobs:
        a = torch.ones(M, K, dtype=tt.DTYPES[dt], device="cuda"); b = torch.ones(K, N, dtype=tt.DTYPES[dt], device="cuda")
        c = torch.empty(M, N, dtype=tt.DTYPES[dt], device="cuda")
        try: tt.launch(a, b, c, cfg); torch.cuda.synchronize()
        except Exception as e: bad.append((dt, cfg, type(e).__name__))
    return bad

def main():
    out, budget = sys.argv[1], float(sys.argv[2])
    shapes = []
    for g in sys.argv[3:]:
        shapes += list(itertools.product(*([int(v) for v in part.split(",")] for part in g.split("/"))))
    t0 = time.time()
    reps = {}
    for s in shapes: reps.setdefault(pattern(s), s)
    jobs = [(dt, cfg) for dt in tt.DTYPES for cfg in tt.CONFIGS]
    work = [(rep, jobs[i::15]) for rep in reps.values() for i in range(15)]
    with mp.get_context("spawn").Pool(15) as pool:
        res = pool.map(compile_for, work)
    bad_by = {}
    for (rep, _), b in zip(work, res): bad_by.setdefault(pattern(rep), set()).update((dt, cfg) for dt, cfg, _ in b)
    for p, b in bad_by.items(): print(f"pattern {p}: {len(b)} refused", flush=True)
    print(f"compiled {len(jobs)} kernels x {len(reps)} patterns in {time.time() - t0:.1f} s", flush=True)
    rows = 0
    with open(os.path.join(out, "triton_gemm_h200.csv"), "w") as f:
        f.write("dtype,M,N,K,block_m,block_n,block_k,num_warps,num_stages,ms\n")
        for (M, N, K) in shapes:
            for dt in tt.DTYPES:
                if time.time() - t0 > budget: print("budget reached", flush=True); return
                badset = bad_by[pattern((M, N, K))]
                torch.manual_seed(0)
                a = torch.randn(M, K, device="cuda").to(tt.DTYPES[dt]); b = torch.randn(K, N, device="cuda").to(tt.DTYPES[dt])
                c = torch.empty(M, N, device="cuda", dtype=tt.DTYPES[dt])
                ref = torch.matmul(a.float(), b.float())
                f.write(f"{dt},{M},{N},{K},cublas,,,,,{tt.measure(lambda: torch.matmul(a, b)):.6f}\n")
                for cfg in tt.CONFIGS:
                    if (dt, cfg) in badset:
                        f.write(f"{dt},{M},{N},{K},{','.join(map(str, cfg))},refused\n"); continue
                    try:
                        ms = tt.measure(lambda: tt.launch(a, b, c, cfg))
                        err = (c.float() - ref).abs().max().item() / (ref.abs().max().item() + 1e-6)
                        f.write(f"{dt},{M},{N},{K},{','.join(map(str, cfg))},{ms:.6f}" + ("" if err < 0.05 else ",wrong") + "\n")
                    except Exception:
                        f.write(f"{dt},{M},{N},{K},{','.join(map(str, cfg))},failed\n")
                    rows += 1
                f.flush()
                print(f"{dt} {M}x{N}x{K} done at {time.time() - t0:.0f} s", flush=True)
    print(f"measured {rows} (problem, configuration) pairs in {time.time() - t0:.1f} s", flush=True)

if __name__ == "__main__":
    main()
