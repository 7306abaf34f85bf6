import numpy as np, data, stop
from stop import StopRule
H2=data.h200(); H1=data.h100()
base=[k for k in H2 if "/" not in data.variant(k)]
H100S={k[1:] for k in H1}
p2=[k for k in base if all(data.pow2(x) for x in k[1:])]; np2=[k for k in base if k not in p2]
print("chosen on: H100 held out by M (4 folds of 18)")
for e in (0.1,0.3,1.0):
    rows=[]
    for hold in (128,512,2048,8192):
        rows+=stop.evaluate(H1,[q for q in H1 if q[1]!=hold],[q for q in H1 if q[1]==hold],[StopRule(epsilon=e)],max_k=20)
    print(f"  eps {e}: mean n {np.mean([r[1] for r in rows]):.1f} worst {max(r[3] for r in rows):.3f} within1% {sum(r[5] for r in rows)}/72")
for label,tr,te in (("H200 run 2 -> the 56 replay problems",[k for k in base if k[1:] in H100S],[k for k in base if k[1:] not in H100S]),("H200 powers of two -> other sizes (32)",p2,np2),("H200 other sizes -> powers of two (96)",np2,p2)):
    print(label)
    for name,r,mk in [(f"top {k}",StopRule(epsilon=-1),k) for k in (3,5,10)]+[(f"auto eps {e} max {m}",StopRule(epsilon=e),m) for e in (0.1,0.3,1.0) for m in (10,20)]:
        row=stop.evaluate(H2,tr,te,[r],max_k=mk)[0]
        print(f"  {name:18s} benchmarks {row[1]:5.1f}  median {row[2]:.3f} worst {row[3]:.3f} mean {row[4]:.3f} within 1% {row[5]}/{row[6]}")
