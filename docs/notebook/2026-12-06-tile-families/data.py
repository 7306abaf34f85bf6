import csv, math, os, collections
ROOT=os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/data/real")
def read(path, keep=lambda k: True):
    P={}
    for row in csv.DictReader(open(path)):
        if row["block_m"]=="cublas": continue
        key=(row["dtype"],int(row["M"]),int(row["N"]),int(row["K"]))
        if not keep(key): continue
        t=tuple(int(row[c]) for c in ("block_m","block_n","block_k","num_warps","num_stages"))
        P.setdefault(key,{})[t]=math.inf if row["ms"]=="refused" else float(row["ms"])
    return P
def h100(): return read(ROOT+"/gpu-tiles/triton_gemm_h100.csv")
def h200():
    P=read(ROOT+"/gpu-tiles-h200/triton_gemm_h200.csv"); P.update(read(ROOT+"/gpu-tiles-h200/m_h200.csv")); return P
def repeat(): return read(ROOT+"/gpu-tiles-h200/repeat_h200.csv")
def pow2(x): return x&(x-1)==0
def variant(k): return k[0]+("" if k[2]%16==0 and k[3]%16==0 else "/x")
