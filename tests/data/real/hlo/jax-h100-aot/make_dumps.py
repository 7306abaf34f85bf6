"""Six JAX programs compiled by XLA for an NVIDIA H100 on a machine without a GPU (an
ahead-of-time, deviceless compile), and XLA's module after its GPU passes dumped for each:
the fixtures beside this file, remade by tests/xla_gpu_aot_test.py at test time.

    JAX with its CUDA plugin (jax-cuda13-plugin, jax-cuda13-pjrt; the local CUDA toolkit's
    ptxas), then:  python make_dumps.py OUT_DIR [--target h100_target.txtpb]

writes OUT_DIR/<program>.sm_9.0a_gpu_after_optimizations.{txt,hlo.pb}. Each program
compiles in a process of its own (XLA_FLAGS are read once per process), on JAX's CPU
platform (JAX_PLATFORMS=cpu: there is no GPU to open) for a compile-only CUDA device that
the target description (h100_target.txtpb, a GpuTargetConfigProto) describes. Without a
GPU XLA does not autotune: every fusion keeps its default configuration.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = ["decoder_bf16_infer", "decoder_train", "resnet_train", "mlp_infer", "attention_bf16", "moe_batched"]
SUFFIX = ".sm_9.0a_gpu_after_optimizations"


def dump_all(out_dir, target):
    """Compiles each program in a child process with XLA's dump flags; keeps its module after
    optimisation as text and proto under the program's name."""
    os.makedirs(out_dir, exist_ok=True)
    for program in PROGRAMS:
        work = os.path.join(out_dir, "xla-dump-" + program)
        shutil.rmtree(work, ignore_errors=True)
        env = dict(os.environ, JAX_PLATFORMS="cpu",
                   XLA_FLAGS=f"--xla_dump_to={work} --xla_dump_hlo_as_proto --xla_dump_hlo_as_text")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--program", program, "--target", target],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"make_dumps: {program} did not compile (exit {r.returncode}):\n{r.stderr[-4000:]}")
        for ext in ("txt", "hlo.pb"):
            found = glob.glob(os.path.join(work, f"*.jit_{program}{SUFFIX}.{ext}"))
            if len(found) != 1:
                sys.exit(f"make_dumps: {program}: expected one *.jit_{program}{SUFFIX}.{ext} in {work}, found {found}")
            shutil.copy(found[0], os.path.join(out_dir, program + SUFFIX + "." + ext))
        shutil.rmtree(work)
        print(program, "compiled", flush=True)


def compile_one(program, target):
    """The child: one program traced with abstract arguments on the described H100 and
    compiled (the dump flags in XLA_FLAGS write its modules)."""
    global S
    from jax.experimental import topologies
    with open(target) as f:
        topology = topologies.get_topology_desc(platform="cuda", topology="1x1x1", target_config=f.read())
    S = jax.sharding.SingleDeviceSharding(topology.devices[0])
    f, args = globals()[program]()
    f.__name__ = f.__qualname__ = program  # the module is named jit_<program>
    jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",)).compile()


# The programs: each returns its function and abstract arguments on the device S.
S = None  # the compile-only H100 (compile_one)
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?")
    parser.add_argument("--target", default=os.path.join(HERE, "h100_target.txtpb"))
    parser.add_argument("--program", choices=PROGRAMS, help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.program:
        compile_one(a.program, a.target)
    elif a.out_dir:
        dump_all(a.out_dir, a.target)
    else:
        parser.error("give OUT_DIR")


if __name__ == "__main__":
    main()
