# Exploration code of docs/notebook/2026-12-06-gpu-waves-and-stop-rule.md (numpy, scipy, scikit-learn).
import math, sys, numpy as np, statistics as st, data, feat
def metrics(P, key, order):
    t=P[key]; best=min(v for v in t.values() if v<math.inf)
    order=[c for c in order if t[c]<math.inf]
    r=[t[c]/best for c in order]
    to1=next(i+1 for i,x in enumerate(r) if x<=1.01)
    return dict(top1=r[0],top3=min(r[:3]),top5=min(r[:5]),to1=to1)
def summarize(name, ms):
    out=[name]
    for k in ("top1","top3","top5"):
        v=[m[k] for m in ms]; out.append(f"{k} {st.median(v):.3f}/{max(v):.3f}/{np.mean(v):.3f}")
    v=[m["to1"] for m in ms]; out.append(f"to1 {st.median(v):.1f}/{np.mean(v):.1f}")
    out.append(f"w1% top3 {sum(m['top3']<=1.01 for m in ms)}/{len(ms)} >5% {sum(m['top3']>1.05 for m in ms)}")
    print("  ".join(out))
def shape(k): return np.array([math.log2(k[1]*k[2]), math.log2(k[3]), math.log2(k[1]/k[2])])
BW=np.array([0.75,0.5,2.0])
def slow(P,q):
    b=min(v for v in P[q].values() if v<math.inf); return {c:v/b for c,v in P[q].items() if v<math.inf}
def prior_scores(P, train, key, excess=0.1, guard=0.25):
    qs=[q for q in train if data.variant(q)==data.variant(key)]
    w=np.array([math.exp(-0.5*np.sum(((shape(q)-shape(key))/BW)**2)) for q in qs]); w/=w.sum()
    S=[slow(P,q) for q in qs]
    near=np.argsort(-w)[:3]
    sc={}
    for c in P[key]:
        vals=[s.get(c) for s in S]
        if any(v is None for v in vals): sc[c]=1e9; continue
        f=sum(wi*math.log(v-1+excess) for wi,v in zip(w,vals))
        g=max(math.log(vals[i]) for i in near)
        sc[c]=f+guard*g
    return sc
def nearest(P, train, key):
    qs=[q for q in train if data.variant(q)==data.variant(key)]
    q=min(qs,key=lambda q: np.sum(((shape(q)-shape(key))/BW)**2)); s=slow(P,q)
    return {c:s.get(c,1e9) for c in P[key]}
def std(sc):
    v=np.array([x for x in sc.values() if x<1e8]); m,s=v.mean(),v.std()+1e-9
    return {c:(x-m)/s if x<1e8 else 10 for c,x in sc.items()}
def learn(P, train, gpu, kind="gbdt", target="near"):
    X=[];y=[]
    for q in train:
        s=slow(P,q)
        for c,v in s.items():
            X.append(feat.phys(q,c,feat.GPU[gpu])); y.append(math.log(v-1+0.1) if target=="near" else math.log(v))
    X=np.array(X);y=np.array(y)
    if kind=="gbdt":
        from sklearn.ensemble import HistGradientBoostingRegressor
        m=HistGradientBoostingRegressor(max_iter=300,learning_rate=0.05,max_leaf_nodes=31,min_samples_leaf=40).fit(X,y)
    else:
        from sklearn.neural_network import MLPRegressor
        from sklearn.preprocessing import StandardScaler
        from sklearn.pipeline import make_pipeline
        m=make_pipeline(StandardScaler(),MLPRegressor(hidden_layer_sizes=(64,64),max_iter=200,early_stopping=True,random_state=0)).fit(X,y)
    return m
def model_scores(m, P, key, gpu):
    cs=list(P[key]); X=np.array([feat.phys(key,c,feat.GPU[gpu]) for c in cs]); p=m.predict(X)
    return dict(zip(cs,p))
def run(P, train, test, gpu, label):
    print(f"== {label}: train {len(train)} test {len(test)}")
    res={n:[] for n in ("nearest","prior","gbdt","mix.25","mix.5","mix1","mlp","pmix.5")}
    g=learn(P,train,gpu,"gbdt"); mm=learn(P,train,gpu,"mlp")
    for key in test:
        pr=prior_scores(P,train,key); gb=model_scores(g,P,key,gpu); ml=model_scores(mm,P,key,gpu)
        sp,sg,sm=std(pr),std(gb),std(ml)
        res["nearest"].append(metrics(P,key,sorted(P[key],key=nearest(P,train,key).get)))
        res["prior"].append(metrics(P,key,sorted(P[key],key=pr.get)))
        res["gbdt"].append(metrics(P,key,sorted(P[key],key=gb.get)))
        res["mlp"].append(metrics(P,key,sorted(P[key],key=ml.get)))
        for a,n in ((0.25,"mix.25"),(0.5,"mix.5"),(1,"mix1")):
            res[n].append(metrics(P,key,sorted(P[key],key=lambda c: sp[c]+a*sg[c])))
        res["pmix.5"].append(metrics(P,key,sorted(P[key],key=lambda c: sp[c]+0.5*sm[c])))
    for n,ms in res.items(): summarize(n,ms)
if __name__=="__main__":
    H2=data.h200(); H1=data.h100()
    base=[k for k in H2 if "/" not in data.variant(k)]
    p2=[k for k in base if all(data.pow2(x) for x in k[1:])]; np2=[k for k in base if k not in p2]
    H100S={k[1:] for k in H1}
    run(H2,[k for k in base if k[1:] in H100S],[k for k in base if k[1:] not in H100S],"h200","H200 run2 -> replay set (56)")
    run(H2,p2,np2,"h200","H200 pow2 -> non-pow2 M")
    run(H2,np2,p2,"h200","H200 non-pow2 -> pow2")
    nk=[k for k in H2 if "/" in data.variant(k)]
    small=[k for k in nk if k[1]<=1000]; large=[k for k in nk if k[1]>1000]
    run(H2,small,large,"h200","H200 NK variant: M<=1000 -> M>1000")
    run(H2,large,small,"h200","H200 NK variant: M>1000 -> M<=1000")
    for hold in (128,8192):
        run(H1,[k for k in H1 if k[1]!=hold],[k for k in H1 if k[1]==hold],"h100",f"H100 hold M={hold}")
