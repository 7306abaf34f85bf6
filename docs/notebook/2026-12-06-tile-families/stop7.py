import numpy as np, data, stop, exp
from stop import StopRule
H1=data.h100(); H2=data.h200()
base=[k for k in H2 if "/" not in data.variant(k)]; H100S={k[1:] for k in H1}
sets={"H100 by M":[(H1,[q for q in H1 if q[1]!=m],[q for q in H1 if q[1]==m]) for m in (128,512,2048,8192)],
      "H200 replay56":[(H2,[k for k in base if k[1:] in H100S],[k for k in base if k[1:] not in H100S])]}
for k in (3,5,8,10,12,14,16,20):
    line=f"fixed top {k}:"
    for name,folds in sets.items():
        r=[x for P,tr,te in folds for x in (lambda rows: rows)( [stop.simulate(P,q,sorted(P[q],key=exp.std(exp.prior_scores(P,tr,q)).get),exp.std(exp.prior_scores(P,tr,q)),StopRule(epsilon=-1),k) for q in te])]
        s=[x[1] for x in r]
        line+=f" | {name}: med {np.median(s):.3f} worst {max(s):.3f} mean {np.mean(s):.3f} w1 {sum(x<=1.01 for x in s)}"
    print(line)
