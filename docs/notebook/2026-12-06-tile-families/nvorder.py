"""nvMatmulHeuristics' order of the kernel's candidates: its own picks mapped into the
candidates first (in its order), then every other candidate by its runtime model."""
import math, itertools
import nvMatmulHeuristics as nv
GPUS={"h100":nv.NvMatmulHeuristicsNvidiaGpu.H100_SXM,"h200":nv.NvMatmulHeuristicsNvidiaGpu.H200_SXM}
PREC={"bf16":"BSS","f32":"TST","f16":"HSS"}
_h={}
def iface(gpu):
    if gpu not in _h:
        _h[gpu]=nv.NvMatmulHeuristicsInterfaceEx(backend=nv.NvMatmulHeuristicsTarget.TRITON,load_discovery_implicitly=True,gpu=GPUS[gpu])
    return _h[gpu]
def snap(v, values):
    return min(values, key=lambda x: (abs(math.log2(x)-math.log2(v)), x))
def warp_split(bm,bn,w):
    # warps as a grid over the CTA tile: 4 -> 2x2; 8 -> 4x2 or 2x4 along the longer side
    if w==4: return 2,2
    return (4,2) if bm>=bn else (2,4)
def config(bm,bn,bk,w,s,dtype):
    c=nv.NvMatmulHeuristicsInterface.nvmmhKernelConfiguration()
    gm,gn=warp_split(bm,bn,w)
    c.cta[:]=(bm,bn,bk); c.warp[:]=(max(16,bm//gm),max(8,bn//gn),bk); c.instr[:]=(16,8,16 if dtype!="f32" else 8)
    c.splitK=1; c.loadStages=s; c.gridSwizzle=1; c.ctaOrder=0; c.cluster[:]=(1,1)
    return c
def order(key, cands, gpu, picks=64):
    dtype,M,N,K=key; h=iface(gpu); prec=PREC[dtype]
    p=h.makeNvMatmulHeuristicsProblem(M,N,K,nv.NvMatmulHeuristicsMatmulLayout.NN_ROW_MAJOR)
    axes=[sorted({c[i] for c in cands}) for i in range(5)]
    out=[]
    for r in h.get(p,picks,precision=prec):
        k=r["kernel"]; w=(k.cta_tile_m//max(1,k.warp_tile_m))*(k.cta_tile_n//max(1,k.warp_tile_n))
        t=(snap(k.cta_tile_m,axes[0]),snap(k.cta_tile_n,axes[1]),snap(k.cta_tile_k,axes[2]),snap(w,axes[3]),min(max(k.stages,axes[4][0]),axes[4][-1]))
        if t in cands and t not in out: out.append(t)
    npicks=len(out)
    import ctypes
    def estimate(c):
        cfg=config(*c,dtype)
        return h.nvMatmulHeuristicsEstimateRuntime(h.handle, prec.encode("ascii"), ctypes.c_int(h.target), ctypes.byref(p), ctypes.byref(cfg), h.hardware_descriptor)
    est={c:estimate(c) for c in cands if c not in out}
    out+=sorted(est,key=est.get)
    return out, npicks
if __name__=="__main__":
    import data, exp, numpy as np
    for name,P,gpu in (("H100 72",data.h100(),"h100"),("H200 base 128",{k:v for k,v in data.h200().items() if "/" not in data.variant(k)},"h200")):
        ms=[];np_=[]
        for key in P:
            cands=[c for c,v in P[key].items() if v<math.inf]
            o,n=order(key,cands,gpu); np_.append(n)
            ms.append(exp.metrics(P,key,o))
        exp.summarize(f"nvMMH {name} (picks mapped {np.mean(np_):.1f})",ms)
