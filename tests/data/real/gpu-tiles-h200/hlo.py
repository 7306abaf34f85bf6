"""HLO text of jnp.dot for each shape of the grids, as gemm_hlo.py writes it. Usage: hlo.py OUTDIR GRID..."""
import os, sys, itertools
import jax, jax.numpy as jnp
out = sys.argv[1]; os.makedirs(out, exist_ok=True)
for g in sys.argv[2:]:
    for M, N, K in itertools.product(*([int(v) for v in part.split(",")] for part in g.split("/"))):
        for dt, jt in (("bf16", jnp.bfloat16), ("f32", jnp.float32)):
            low = jax.jit(jnp.dot).lower(jax.ShapeDtypeStruct((M, K), jt), jax.ShapeDtypeStruct((K, N), jt))
            open(os.path.join(out, f"gemm_{dt}_{M}x{N}x{K}.hlo"), "w").write(low.as_text(dialect="hlo"))
print("hlo written", len(os.listdir(out)))
