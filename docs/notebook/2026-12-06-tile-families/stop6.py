import numpy as np, data, stop, exp, math
from stop import StopRule
H1=data.h100(); H2=data.h200()
base=[k for k in H2 if "/" not in data.variant(k)]; H100S={k[1:] for k in H1}
rng=np.random.default_rng(0)
def evaluate(P,train,test,rule,max_k=20,jitter=0.0):
    out=[]
    for k in test:
        pr=exp.std(exp.prior_scores(P,train,k)); order=sorted(P[k],key=pr.get)
        z={c:v+rng.normal(0,jitter) for c,v in pr.items()} if jitter else pr
        out.append(stop.simulate(P,k,order,z,rule,max_k))
    return out
grid=[StopRule(epsilon=e,slope=b,slope_sd=sd,noise=nz,noise_weight=w) for e in (0.3,1.0) for b in (0.3,0.5,1.0) for sd in (0.05,0.2) for nz in (0.03,0.1) for w in (4,16)]
sets={"H100 by M":[(H1,[q for q in H1 if q[1]!=m],[q for q in H1 if q[1]==m]) for m in (128,512,2048,8192)],
      "H200 replay56":[(H2,[k for k in base if k[1:] in H100S],[k for k in base if k[1:] not in H100S])]}
for rule in grid:
    line=f"eps {rule.epsilon} slope {rule.slope}±{rule.slope_sd} noise {rule.noise}x{rule.noise_weight}:"
    for name,folds in sets.items():
        for j in (0.0,0.03):
            r=[x for P,tr,te in folds for x in evaluate(P,tr,te,rule,jitter=j)]
            n=np.mean([x[0] for x in r]); s=[x[1] for x in r]
            line+=f" | {name} j{j}: n {n:.1f} med {np.median(s):.3f} worst {max(s):.3f} w1 {sum(x<=1.01 for x in s)}"
    print(line)
