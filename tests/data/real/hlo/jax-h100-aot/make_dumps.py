# Deviceless AOT compile of several JAX programs for H100 (sm_90a); dumps XLA after-optimization HLO.
# Usage: /tmp/jaxgpu-research/venv13/bin/python make_dumps.py            (runs all, one subprocess each)
#        /tmp/jaxgpu-research/venv13/bin/python make_dumps.py <program>  (single program, in-process)
import os, sys, subprocess, glob, shutil
BASE = "/tmp/xla-gpu-dumps"
PROGRAMS = ["decoder_bf16_infer", "decoder_train", "resnet_train", "mlp_infer", "attention_bf16", "moe_batched"]

def run_all():
    for p in PROGRAMS:
        d = os.path.join(BASE, p); shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
        env = dict(os.environ, JAX_PLATFORMS="cpu",
                   XLA_FLAGS=f"--xla_dump_to={d} --xla_dump_hlo_as_proto --xla_dump_hlo_as_text")
        r = subprocess.run([sys.executable, __file__, p], env=env)
        print(p, "rc", r.returncode, flush=True)
        keep = os.path.join(BASE, "keep"); os.makedirs(keep, exist_ok=True)
        for ext in ("txt", "hlo.pb"):
            src = glob.glob(os.path.join(d, f"*.jit_{p}.sm_9.0a_gpu_after_optimizations.{ext}"))
            assert len(src) == 1, src
            shutil.copy(src[0], os.path.join(keep, f"{p}.sm_9.0a_gpu_after_optimizations.{ext}"))

if __name__ == "__main__" and len(sys.argv) == 1:
    run_all(); sys.exit(0)

import jax, jax.numpy as jnp
from jax.experimental import topologies
cfg = open('/tmp/jaxgpu-research/h100_sxm.txtpb').read()
topo = topologies.get_topology_desc(platform="cuda", topology="1x1x1", target_config=cfg)
S = jax.sharding.SingleDeviceSharding(topo.devices[0])
bf16, f32, i32 = jnp.bfloat16, jnp.float32, jnp.int32
def sds(shape, dt): return jax.ShapeDtypeStruct(shape, dt, sharding=S)
def tmap_sds(tree): return jax.tree_util.tree_map(lambda a: sds(a.shape, a.dtype), tree)

# ---------------- decoder ----------------
B, T, D, H, V, L, FF = 4, 256, 512, 8, 8192, 2, 2048
def decoder_params(dt):
    p = {"emb": jax.ShapeDtypeStruct((V, D), dt), "pos": jax.ShapeDtypeStruct((T, D), dt),
         "lnf_g": jax.ShapeDtypeStruct((D,), dt), "lnf_b": jax.ShapeDtypeStruct((D,), dt),
         "head": jax.ShapeDtypeStruct((D, V), dt), "layers": []}
    for _ in range(L):
        p["layers"].append({k: jax.ShapeDtypeStruct(s, dt) for k, s in dict(
            wq=(D, D), wk=(D, D), wv=(D, D), wo=(D, D), ln1_g=(D,), ln1_b=(D,), ln2_g=(D,), ln2_b=(D,),
            w1=(D, FF), b1=(FF,), w2=(FF, D), b2=(D,)).items()})
    return p

def layer_norm(x, g, b, eps=1e-5):
    xf = x.astype(f32)
    m = xf.mean(-1, keepdims=True); v = ((xf - m) ** 2).mean(-1, keepdims=True)
    return ((xf - m) * jax.lax.rsqrt(v + eps)).astype(x.dtype) * g + b

def attn(x, lp):
    b, t, d = x.shape; hd = d // H
    q = (x @ lp["wq"]).reshape(b, t, H, hd).transpose(0, 2, 1, 3)
    k = (x @ lp["wk"]).reshape(b, t, H, hd).transpose(0, 2, 1, 3)
    v = (x @ lp["wv"]).reshape(b, t, H, hd).transpose(0, 2, 1, 3)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(hd).astype(x.dtype)
    mask = jnp.tril(jnp.ones((t, t), bool))
    s = jnp.where(mask, s, jnp.asarray(-1e9, s.dtype))
    pr = jax.nn.softmax(s.astype(f32), axis=-1).astype(x.dtype)
    o = jnp.einsum("bhqk,bhkd->bhqd", pr, v).transpose(0, 2, 1, 3).reshape(b, t, d)
    return o @ lp["wo"]

def decoder_fwd(p, tokens, cdt):
    p = jax.tree_util.tree_map(lambda a: a.astype(cdt), p)
    x = p["emb"][tokens] + p["pos"][None, :tokens.shape[1]]
    for lp in p["layers"]:
        x = x + attn(layer_norm(x, lp["ln1_g"], lp["ln1_b"]), lp)
        h = layer_norm(x, lp["ln2_g"], lp["ln2_b"])
        x = x + (jax.nn.gelu(h @ lp["w1"] + lp["b1"]) @ lp["w2"] + lp["b2"])
    x = layer_norm(x, p["lnf_g"], p["lnf_b"])
    return x @ p["head"]

def decoder_bf16_infer():
    f = lambda p, tok: decoder_fwd(p, tok, bf16)
    return f, (tmap_sds(decoder_params(bf16)), sds((B, T), i32))

def decoder_train():
    params = decoder_params(f32)
    def loss_fn(p, tok, tgt):
        logits = decoder_fwd(p, tok, bf16).astype(f32)
        lp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(lp, tgt[..., None], -1).mean()
    def step(p, m, v, tok, tgt, t):  # hand-written Adam
        loss, g = jax.value_and_grad(loss_fn)(p, tok, tgt)
        b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-8
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        tt = t + 1.0
        p = jax.tree_util.tree_map(lambda p, m, v: p - lr * (m / (1 - b1 ** tt)) / (jnp.sqrt(v / (1 - b2 ** tt)) + eps), p, m, v)
        return p, m, v, loss
    ps = tmap_sds(params)
    return step, (ps, ps, ps, sds((B, T), i32), sds((B, T), i32), sds((), f32))

# ---------------- resnet ----------------
def resnet_params():
    def conv(k, ci, co): return jax.ShapeDtypeStruct((k, k, ci, co), f32)
    def bn(c): return {"g": jax.ShapeDtypeStruct((c,), f32), "b": jax.ShapeDtypeStruct((c,), f32)}
    p = {"stem": conv(3, 3, 32), "stem_bn": bn(32), "blocks": []}
    cin = 32
    for cout, stride in [(32, 1), (64, 2), (64, 1), (128, 2)]:
        blk = {"c1": conv(3, cin, cout), "bn1": bn(cout), "c2": conv(3, cout, cout), "bn2": bn(cout), "stride": stride}
        if stride != 1 or cin != cout: blk["proj"] = conv(1, cin, cout)
        p["blocks"].append(blk); cin = cout
    p["head_w"] = jax.ShapeDtypeStruct((cin, 10), f32); p["head_b"] = jax.ShapeDtypeStruct((10,), f32)
    return p

def conv2d(x, w, stride=1):
    return jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
def batchnorm(x, bp, eps=1e-5):
    m = x.mean((0, 1, 2)); v = x.var((0, 1, 2))
    return (x - m) * jax.lax.rsqrt(v + eps) * bp["g"] + bp["b"]

def resnet_fwd(p, strides, x):
    x = jax.nn.relu(batchnorm(conv2d(x, p["stem"]), p["stem_bn"]))
    for blk, s in zip(p["blocks"], strides):
        h = jax.nn.relu(batchnorm(conv2d(x, blk["c1"], s), blk["bn1"]))
        h = batchnorm(conv2d(h, blk["c2"]), blk["bn2"])
        sc = conv2d(x, blk["proj"], s) if "proj" in blk else x
        x = jax.nn.relu(h + sc)
    return x.mean((1, 2)) @ p["head_w"] + p["head_b"]

def resnet_train():
    p = resnet_params()
    strides = [b.pop("stride") for b in p["blocks"]]
    def loss_fn(p, x, y):
        lp = jax.nn.log_softmax(resnet_fwd(p, strides, x))
        return -jnp.take_along_axis(lp, y[:, None], -1).mean()
    def step(p, x, y):  # SGD
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g), loss
    return step, (tmap_sds(p), sds((16, 32, 32, 3), f32), sds((16,), i32))

# ---------------- mlp / attention / moe ----------------
def mlp_infer():
    dims = [784, 1000, 300, 10]
    p = [(sds((a, b), f32), sds((b,), f32)) for a, b in zip(dims[:-1], dims[1:])]
    def f(p, x):
        for i, (w, b) in enumerate(p):
            x = x @ w + b
            if i < len(p) - 1: x = jax.nn.relu(x)
        return x
    return f, (p, sds((100, 784), f32))

def attention_bf16():
    def f(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)
    a = sds((2, 16, 512, 64), bf16)
    return f, (a, a, a)

def moe_batched():
    def f(x, w1, w2):
        h = jax.nn.gelu(jnp.einsum("etd,edf->etf", x, w1))
        return jnp.einsum("etf,efd->etd", h, w2)
    return f, (sds((8, 256, 512), bf16), sds((8, 512, 2048), bf16), sds((8, 2048, 512), bf16))

if __name__ == "__main__":
    name = sys.argv[1]
    f, args = globals()[name]()
    f.__name__ = f.__qualname__ = name   # module name becomes jit_<program>
    c = jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",)).compile()
    print(name, "compiled OK", flush=True)
