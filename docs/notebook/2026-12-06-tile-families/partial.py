"""Does a pruned flow's partial report (the top few of each first-half shape) help the
second half? (A) the prior of the 72 training problems; (B) the partial problems joined
as the server joins them now (each configuration's mean over the problems that measured
it); (C) each partial problem's measured residuals against the prior's expectation at
it, spread by the GP over configurations and added to the second-half problem's values,
weighted by shape nearness."""
import math, numpy as np, data, exp
H2=data.h200(); H1=data.h100()
base=[k for k in H2 if "/" not in data.variant(k)]; H100S={k[1:] for k in H1}
train=[k for k in base if k[1:] in H100S]; test=[k for k in base if k[1:] not in H100S]
shapes=sorted({k[1:] for k in test})
axes=[sorted({s[i] for s in shapes}) for i in range(3)]
first={s for s in shapes if sum(axes[i].index(s[i]) for i in range(3))%2==0}
h1=[k for k in test if k[1:] in first]; h2=[k for k in test if k[1:] not in first]
def point(c): return np.array([math.log2(c[0]),math.log2(c[1]),math.log2(c[2]),math.log2(c[3]),c[4]])
def gp_correction(tiles, expected, measured, noise=1.0):
    idx=[tiles.index(c) for c in measured]
    r=np.array([math.log(measured[c])-expected[i] for c,i in zip(measured,idx)])
    P=np.array([point(c) for c in tiles]); M=P[idx]
    K=np.exp(-((M[:,None,:]-M[None,:,:])**2).sum(-1)/2)+noise*np.eye(len(idx))
    Ki=np.linalg.inv(K); one=np.ones(len(idx)); b=(one@Ki@r)/(one@Ki@one)
    dual=Ki@(r-b)
    Ks=np.exp(-((P[:,None,:]-M[None,:,:])**2).sum(-1)/2)
    return Ks@dual
def expected_log_slowdown(P, train, key, tiles):
    qs=[q for q in train if data.variant(q)==data.variant(key)]
    w=np.array([math.exp(-0.5*np.sum(((exp.shape(q)-exp.shape(key))/exp.BW)**2)) for q in qs]); w/=w.sum()
    S=[exp.slow(P,q) for q in qs]
    return np.array([sum(wi*math.log(s[c]) for wi,s in zip(w,S) if c in s)/max(1e-9,sum(wi for wi,s in zip(w,S) if c in s)) for c in tiles])
for k_top in (3,5):
    reports={}
    for q in h1:
        pr=exp.prior_scores(H2,train,q); order=[c for c in sorted(H2[q],key=pr.get) if H2[q][c]<math.inf]
        reports[q]={c:H2[q][c] for c in order[:k_top]}
    resA=[];resB=[];resC=[]
    for p in h2:
        tiles=[c for c in H2[p] if H2[p][c]<math.inf]
        A=exp.std(exp.prior_scores(H2,train,p))
        # B: partial problems join the per-configuration means
        P2=dict(H2); 
        for q,rep in reports.items(): P2[('p',)+q]=rep
        def prior_with_partial():
            qs=[q for q in train if data.variant(q)==data.variant(p)]+[('p',)+q for q in reports if data.variant(q)==data.variant(p)]
            shp=lambda q: exp.shape(q[1:] if q[0]=='p' else q)
            w=np.array([math.exp(-0.5*np.sum(((shp(q)-exp.shape(p))/exp.BW)**2)) for q in qs])
            S=[exp.slow(P2,q) for q in qs]
            sc={}
            for c in tiles:
                num=den=0
                for wi,s in zip(w,S):
                    if c in s: num+=wi*math.log(s[c]-1+0.1); den+=wi
                sc[c]=num/den
            return sc
        B=exp.std(prior_with_partial())
        # C: residual corrections of the partial problems, shape-weighted
        corr=np.zeros(len(tiles)); wsum=0
        for q,rep in reports.items():
            if data.variant(q)!=data.variant(p): continue
            wq=math.exp(-0.5*np.sum(((exp.shape(q)-exp.shape(p))/exp.BW)**2))
            e=expected_log_slowdown(H2,train,q,tiles)
            corr+=wq*gp_correction(tiles,e,{c:v for c,v in rep.items() if c in tiles}); wsum+=wq
        base_w=1.0  # the full problems' weight against the partial ones'
        C={c:A[c]+ (corr[i]/(wsum+base_w))*4 for i,c in enumerate(tiles)}
        for res,sc in ((resA,A),(resB,B),(resC,C)):
            res.append(exp.metrics(H2,p,sorted(tiles,key=sc.get)))
    print(f"first half reports its top {k_top}:")
    for n,r in (("A prior",resA),("B joined as now",resB),("C residual correction",resC)): exp.summarize("  "+n,r)
