import math, sys, numpy as np, data, exp, feat
def cfgshape(key,c,g):
    dt,M,N,K=key; bm,bn,bk,w,s=c
    f=feat.phys(key,c,g)
    ctas=2**f[5]; sl=g["sms"]*f[8]
    return np.array([math.log2(ctas/g["sms"]), math.log2(math.ceil(K/bk))])
def pprior(P, train, key, gpu, bwc, excess=0.1, guard=0.25, mode="mult"):
    g=feat.GPU[gpu]
    qs=[q for q in train if data.variant(q)==data.variant(key)]
    ws=np.array([math.exp(-0.5*np.sum(((exp.shape(q)-exp.shape(key))/exp.BW)**2)) for q in qs])
    S=[exp.slow(P,q) for q in qs]
    near=np.argsort(-ws)[:3]
    sc={}
    for c in P[key]:
        vals=[s.get(c) for s in S]
        if any(v is None for v in vals): sc[c]=1e9; continue
        cp=cfgshape(key,c,g)
        wc=np.array([math.exp(-0.5*np.sum(((cfgshape(q,c,g)-cp)/bwc)**2)) for q in qs])
        w=ws*wc+1e-12*ws; w/=w.sum()
        f=sum(wi*math.log(v-1+excess) for wi,v in zip(w,vals))
        gg=max(math.log(vals[i]) for i in near)
        sc[c]=f+guard*gg
    return sc
def run(P,train,test,gpu,label,bwcs):
    print("==",label)
    for bwc in bwcs:
        ms=[exp.metrics(P,k,sorted(P[k],key=pprior(P,train,k,gpu,np.array(bwc)).get)) for k in test]
        exp.summarize(f"bwc {bwc}",ms)
H2=data.h200(); H1=data.h100()
base=[k for k in H2 if "/" not in data.variant(k)]
p2=[k for k in base if all(data.pow2(x) for x in k[1:])]; np2=[k for k in base if k not in p2]
H100S={k[1:] for k in H1}
B=[(1e9,1e9),(0.5,1e9),(1,1e9),(2,1e9),(1,1),(0.5,0.5)]
run(H2,[k for k in base if k[1:] in H100S],[k for k in base if k[1:] not in H100S],"h200","replay56",B)
run(H2,p2,np2,"h200","pow2->np2",B)
run(H2,np2,p2,"h200","np2->pow2",B)
