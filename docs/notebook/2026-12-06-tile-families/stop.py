import math, sys, numpy as np, statistics as st, data, exp, itertools
import importlib.util; _s=importlib.util.spec_from_file_location("sr",__import__("os").path.join(__import__("os").path.dirname(__file__), "../../../client/python/tgraph/_stop_rule.py")); _m=importlib.util.module_from_spec(_s); _s.loader.exec_module(_m); StopRule=_m.StopRule

def simulate(P, key, order, z, rule, max_k=20):
    t=P[key]; order=[c for c in order if t[c]<math.inf]; best=min(t[c] for c in order)
    ms=[];zs=[]
    for i,c in enumerate(order[:max_k]):
        ms.append(t[c]); zs.append(z[c])
        rest=[z[x] for x in order[i+1:]]
        if rule.stop(zs,ms,rest): break
    return len(ms), min(ms)/best
def evaluate(P, train, test, rules, max_k=20):
    pre={}
    for k in test:
        pr=exp.std(exp.prior_scores(P,train,k)); order=sorted(P[k],key=pr.get); pre[k]=(order,pr)
    out=[]
    for rule in rules:
        r=[simulate(P,k,pre[k][0],pre[k][1],rule,max_k) for k in test]
        n=[x[0] for x in r]; s=[x[1] for x in r]
        out.append((rule,np.mean(n),st.median(s),max(s),np.mean(s),sum(x<=1.01 for x in s),len(s)))
    return out
if __name__=="__main__":
    H2=data.h200(); H1=data.h100()
    grid=[StopRule(epsilon=e,slope=b,noise=nz,min_k=m) for e in (0.05,0.2) for b in (0.2,0.5) for nz in (0.1,0.2) for m in (2,3)]
    which=sys.argv[1] if len(sys.argv)>1 else "h100"
    if which=="h100":
        res={}
        for hold in (128,512,2048,8192):
            for row in evaluate(H1,[k for k in H1 if k[1]!=hold],[k for k in H1 if k[1]==hold],grid):
                res.setdefault(row[0],[]).append(row[1:])
        for rule,rows in res.items():
            n=np.mean([r[0] for r in rows]); md=np.median([r[1] for r in rows]); w=max(r[2] for r in rows); w1=sum(r[4] for r in rows)
            print(f"eps {rule.epsilon} slope {rule.slope} noise {rule.noise} min {rule.min_k}: mean n {n:.1f} median {md:.3f} worst {w:.3f} within1% {w1}/72")
