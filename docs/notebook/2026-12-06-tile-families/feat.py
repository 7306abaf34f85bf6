import math, numpy as np
GPU={"h100":dict(sms=132,smem=228*1024,regs=65536,ctas=32,warps=64),
     "h200":dict(sms=132,smem=228*1024,regs=65536,ctas=32,warps=64)}
def cdiv(a,b): return -(-a//b)
def phys(key, t, g):
    dt,M,N,K=key; bm,bn,bk,w,s=t; eb=4 if dt=="f32" else 2
    pm,pn,ks=cdiv(M,bm),cdiv(N,bn),cdiv(K,bk); ctas=pm*pn
    smem=s*(bm+bn)*bk*eb
    regs=min(255, bm*bn/(32*w) + 32)
    r=max(1,min(g["ctas"], g["smem"]//smem if smem else 99, g["warps"]//w, int(g["regs"]//(regs*32*w))))
    slots=g["sms"]*r
    waves=cdiv(ctas,slots); fill=ctas/(waves*slots)
    waves1=cdiv(ctas,g["sms"])
    pad=1-M*N*K/(pm*bm*pn*bn*ks*bk)
    bpf=eb*(bm+bn)/(2*bm*bn)
    spill=max(0.0, bm*bn/(32*w) - 200)
    # per-SM serial work in CTA-iterations, occupancy-aware
    work=cdiv(ctas,g["sms"])*ks
    est=math.log2(waves)+math.log2(ks)+math.log2(bm*bn*bk)  # flops per SM-slot per wave
    return [math.log2(bm),math.log2(bn),math.log2(bk),math.log2(w),s,
            math.log2(ctas), waves, fill, r, math.log2(ks), pad, bpf*100, math.log2(work), spill/64, math.log2(smem/1024),
            waves1, ctas/(waves1*g["sms"]), est,
            math.log2(M),math.log2(N),math.log2(K), 1.0 if dt=="f32" else 0.0]
