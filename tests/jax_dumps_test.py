"""Real JAX programs, dumped at test time by the JAX of the test environment
(scripts/test-venv), through a real tgraph-server: an MLP train step, a small
convolutional net's train step and a transformer block's forward pass in bf16, each
jitted on the CPU with XLA_FLAGS=--xla_dump_to (text and proto). For each: the text and
the proto give one graph and one hash; the module is searched, the best row is applied,
and the applied text registers again with the same configurable instructions in the same
row order. XLA itself (jaxlib's bundled HLO parser, xla_client.hlo.hlo_module_from_text)
reads the applied text and keeps the layouts written into it.

Run by ctest (jax_dumps) with pytest; the server fixtures are the Python client's
(client/python/tests). `python3 jax_dumps_test.py --dump DIR` writes the dumps alone.
"""
import glob
import os
import re
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.environ.get("TGRAPH_SOURCE_DIR", "."), "client", "python", "tests"))

PROGRAMS = ("tgraph_mlp_train_step", "tgraph_convnet_train_step", "tgraph_transformer_block_bf16",
            "tgraph_grouped_convnet_train_step", "tgraph_control_flow")


def dump_programs(out_dir):
    """Jits the three programs on the CPU; XLA_FLAGS (set by the caller before JAX
    starts) writes each module before and after optimisation, as text and as proto."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(0)

    def init(*shape, dtype=np.float32):
        return jnp.asarray(rng.normal(0, 0.05, shape).astype(dtype))

    def sgd(params, grads):
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

    def cross_entropy(logits, labels):
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * labels, axis=-1))

    def mlp_loss(params, x, y):
        h = jax.nn.relu(x @ params["w1"] + params["b1"])
        return cross_entropy(h @ params["w2"] + params["b2"], y)

    def tgraph_mlp_train_step(params, x, y):
        return sgd(params, jax.grad(mlp_loss)(params, x, y))

    def conv_loss(params, x, y):
        dn = ("NHWC", "HWIO", "NHWC")
        h = jax.nn.relu(lax.conv_general_dilated(x, params["k1"], (1, 1), "SAME", dimension_numbers=dn))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = jax.nn.relu(lax.conv_general_dilated(h, params["k2"], (1, 1), "SAME", dimension_numbers=dn))
        return cross_entropy(h.reshape(h.shape[0], -1) @ params["w"], y)

    def tgraph_convnet_train_step(params, x, y):
        return sgd(params, jax.grad(conv_loss)(params, x, y))

    # Grouped and depthwise convolutions: feature_group_count 4 and 16 forward, and
    # batch_group_count in the kernels' gradients, which the text omits at 1.
    def grouped_loss(params, x, y):
        dn = ("NHWC", "HWIO", "NHWC")
        h = jax.nn.relu(lax.conv_general_dilated(x, params["k1"], (1, 1), "SAME", dimension_numbers=dn,
                                                 feature_group_count=4))
        h = jax.nn.relu(lax.conv_general_dilated(h, params["k2"], (2, 2), "SAME", dimension_numbers=dn,
                                                 feature_group_count=16))
        return cross_entropy(h.reshape(h.shape[0], -1) @ params["w"], y)

    def tgraph_grouped_convnet_train_step(params, x, y):
        return sgd(params, jax.grad(grouped_loss)(params, x, y))

    # Loops (scan and while: a while's body and condition, which the text writes in the
    # other order than the proto lists them), a conditional, sort, top-k, scatter,
    # gather and random bits, each around a matrix product.
    def tgraph_control_flow(x, i, key):
        def body(c, v):
            return jnp.tanh(v @ c) * 0.5, c.sum()
        h, sums = lax.scan(body, x[:8, :8], x.reshape(-1, 8, 8)[:4])
        h = lax.cond(sums.sum() > 0, lambda v: jnp.sin(v) @ v, lambda v: jnp.cos(v) @ v.T, h)
        h, _ = lax.while_loop(lambda c: c[1] < 3, lambda c: (c[0] @ c[0] * 0.1, c[1] + 1), (h, 0))
        noise = jax.random.normal(key, h.shape) @ h
        top, _ = lax.top_k(jnp.sort(noise, axis=1), 3)
        return h.at[i].add(1.0), jnp.take(noise, i, axis=0), top

    def layer_norm(x, g):
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
        return (x - mean) * lax.rsqrt(var + 1e-5) * g

    def tgraph_transformer_block_bf16(p, x):
        b, s, d = x.shape
        heads = 4
        h = layer_norm(x, p["g1"])
        q, k, v = (jnp.einsum("bsd,de->bse", h, p[n]).reshape(b, s, heads, d // heads) for n in ("wq", "wk", "wv"))
        att = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // heads), axis=-1)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d) @ p["wo"]
        return x + jax.nn.gelu(layer_norm(x, p["g2"]) @ p["w1"]) @ p["w2"]

    mlp = {"w1": init(784, 256), "b1": init(256), "w2": init(256, 10), "b2": init(10)}
    conv = {"k1": init(3, 3, 3, 16), "k2": init(3, 3, 16, 32), "w": init(16 * 16 * 32, 10)}
    bf = jnp.bfloat16
    block = {n: init(*shape).astype(bf) for n, shape in (("g1", (128,)), ("g2", (128,)), ("wq", (128, 128)),
                                                       ("wk", (128, 128)), ("wv", (128, 128)), ("wo", (128, 128)),
                                                       ("w1", (128, 512)), ("w2", (512, 128)))}
    jax.jit(tgraph_mlp_train_step).lower(mlp, init(128, 784), init(128, 10)).compile()
    jax.jit(tgraph_convnet_train_step).lower(conv, init(8, 32, 32, 3), init(8, 10)).compile()
    jax.jit(tgraph_transformer_block_bf16).lower(block, init(2, 64, 128).astype(bf)).compile()
    jax.jit(tgraph_control_flow).lower(init(32, 8), jnp.array([1, 3, 5]), jax.random.PRNGKey(0)).compile()
    grouped = {"k1": init(3, 3, 2, 16), "k2": init(3, 3, 1, 16), "w": init(8 * 8 * 16, 10)}
    jax.jit(tgraph_grouped_convnet_train_step).lower(grouped, init(8, 16, 16, 8), init(8, 10)).compile()
    print(f"jax {jax.__version__}: {len(os.listdir(out_dir))} files in {out_dir}")


def dump_env(out_dir):
    flags = (f"--xla_dump_to={out_dir} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto "
             "--xla_dump_hlo_module_re=tgraph_.*")
    return dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """program -> {"txt": path, "pb": path} of its module before optimisations, and
    {"after_txt", "after_pb"} of it after the CPU compiler's passes."""
    try:
        import jax  # noqa: F401
    except ImportError:
        pytest.fail(f"jax is missing from {sys.executable}: run scripts/install-deps --test (scripts/test-venv)")
    out = str(tmp_path_factory.mktemp("jax-dumps"))
    r = subprocess.run([sys.executable, __file__, "--dump", out], capture_output=True, text=True, env=dump_env(out),
                       timeout=300)
    assert r.returncode == 0, r.stderr
    found = {}
    for program in PROGRAMS:
        files = {}
        for ext, suffix in (("txt", "before_optimizations.txt"), ("pb", "before_optimizations.hlo.pb"),
                            ("after_txt", "cpu_after_optimizations.txt"), ("after_pb", "cpu_after_optimizations.hlo.pb")):
            matches = glob.glob(os.path.join(out, f"module_*.jit_{program}.{suffix}"))
            assert len(matches) == 1, f"{program} {suffix}: {sorted(os.listdir(out))}"
            files[ext] = matches[0]
        found[program] = files
    return found


def xla_parse(text):
    """XLA's own HLO parser, as jaxlib bundles it."""
    from jax._src.lib import xla_client
    return xla_client.hlo.hlo_module_from_text(text)


def changed_instructions(before, after):
    """The instructions whose line differs between two module texts: name -> new line."""
    def lines(text):
        out = {}
        for line in text.splitlines():
            m = re.match(r"\s*(?:ROOT )?([\w.-]+) = ", line)
            if m:
                out[m.group(1)] = line.strip()
        return out
    a, b = lines(before), lines(after)
    return {n: line for n, line in b.items() if a.get(n) != line}


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_jax_dump_registers_as_text_and_proto_alike_is_searched_and_its_applied_row_registers_again(
        program, dumps, server):
    import tgraph
    client = tgraph.Client(server.address)
    text_module = tgraph.HloModule.from_file(dumps[program]["txt"])
    proto_module = tgraph.HloModule.from_file(dumps[program]["pb"])
    text_reg = client.register(text_module)
    proto_reg = client.register(proto_module)
    assert text_reg.graph_hash == proto_reg.graph_hash
    assert proto_reg.already_registered
    names = [n.instruction for n in text_reg.configurable_nodes]
    assert names == [n.instruction for n in proto_reg.configurable_nodes]
    assert names, f"{program}: no configurable instruction"

    proposals = client.search("layout:xla:random", text_module, results=4)
    assert proposals.configs.shape == (4, len(names), 18)
    assert np.all(np.diff(proposals.scores) >= 0)  # best first
    # The best proposal that changes a layout (one that keeps every default is no test).
    row = next(r for r in proposals.configs if (r >= 0).any())
    applied = client.apply(text_module, row)
    assert applied.changes and applied.text.encode() != text_module.data
    again = client.register(tgraph.HloModule(applied.text))
    assert [n.instruction for n in again.configurable_nodes] == names
    assert again.num_nodes - text_reg.num_nodes == applied.copies  # each copy is one new node

    # XLA reads the applied text, and what it prints keeps every layout written.
    parsed = xla_parse(applied.text)
    printed = parsed.to_string()
    xla_parse(open(dumps[program]["txt"]).read())
    for name, line in changed_instructions(open(dumps[program]["txt"]).read(), applied.text).items():
        layouts = re.findall(r"\{[0-9,]+\}", line.split(" = ", 1)[1].split("(", 1)[0])
        if not layouts:
            continue
        xla_line = next((l for l in printed.splitlines() if re.match(rf"\s*(?:ROOT )?{re.escape(name)} = ", l)), None)
        assert xla_line is not None, f"{program}: XLA's module has no {name}"
        assert all(l in xla_line for l in layouts), f"{program}: {name}: {layouts} not in XLA's {xla_line}"


def featurized(path, out_dir):
    """The graph tgraph-featurize makes of a module: its arrays and its node table."""
    from conftest import binary, run
    stem = os.path.join(out_dir, os.path.basename(path).replace(".", "_"))
    run([binary("model", "hlo", "tgraph-featurize"), "module", "--in", path, "--out", stem + ".npz",
         "--nodes_tsv", stem + ".tsv"])
    with np.load(stem + ".npz") as z:
        arrays = {name: z[name] for name in z.files}
    with open(stem + ".tsv") as f:
        return arrays, f.read()


@pytest.mark.parametrize("stage", ("before", "after"))
@pytest.mark.parametrize("program", PROGRAMS)
def test_the_text_and_the_proto_of_every_dumped_module_give_byte_identical_graphs(program, stage, dumps, tmp_path):
    files = dumps[program]
    txt, pb = (files["txt"], files["pb"]) if stage == "before" else (files["after_txt"], files["after_pb"])
    (text_arrays, text_nodes), (proto_arrays, proto_nodes) = featurized(txt, tmp_path), featurized(pb, tmp_path)
    assert sorted(text_arrays) == sorted(proto_arrays)
    for name, a in proto_arrays.items():
        b = text_arrays[name]
        assert a.dtype == b.dtype and a.shape == b.shape, f"{program} {stage}: {name}"
        if not np.array_equal(a, b):
            rows, cols = np.nonzero(a != b) if a.ndim == 2 else (np.nonzero(a != b)[0], None)
            columns = sorted(set(cols.tolist())) if cols is not None else []
            pytest.fail(f"{program} {stage}: {name} differs in {len(rows)} values (columns {columns[:10]}; "
                        f"first node {rows[0]}: proto {a[rows[0]]} text {b[rows[0]]})")
    assert text_nodes == proto_nodes
    if program == "tgraph_grouped_convnet_train_step" and stage == "before":
        # The check has teeth: the group counts (node_feat 107, 108) are not all 1 here
        # (the CPU compiler rewrites batch-grouped convolutions away).
        assert (proto_arrays["node_feat"][:, 107] > 1).any() and (proto_arrays["node_feat"][:, 108] > 1).any()


def test_xlas_parser_refuses_what_is_not_hlo():
    """The check above can fail: the parser refuses a broken module."""
    try:
        import jax  # noqa: F401
    except ImportError:
        pytest.fail(f"jax is missing from {sys.executable}: run scripts/install-deps --test (scripts/test-venv)")
    with pytest.raises(Exception, match="Unknown opcode: nope"):
        xla_parse("HloModule m\nENTRY e {\n  a = f32[2]{0} parameter(0)\n  ROOT b = f32[2]{0} nope(a)\n}\n")


def test_an_opcode_xlas_parser_refuses_ours_refuses_where_it_is_written(tmp_path):
    from conftest import binary
    for text, opcode, at in (("  ROOT b = f32[2]{0} nope(a)", "nope", "line 4, column 22"),
                             ("  ROOT b = f32[2]{0} dto(a, a)", "dto", "line 4, column 22")):
        module = "HloModule m\nENTRY e {\n  a = f32[2]{0} parameter(0)\n" + text + "\n}\n"
        with pytest.raises(Exception, match=f"Unknown opcode: {opcode}"):
            xla_parse(module)
        (tmp_path / "m.txt").write_text(module)
        r = subprocess.run([binary("model", "hlo", "tgraph-featurize"), "module", "--in", str(tmp_path / "m.txt"),
                            "--out", str(tmp_path / "m.npz")], capture_output=True, text=True)
        assert r.returncode == 1 and f"{at}: unknown opcode '{opcode}' (instruction 'b')" in r.stderr, r.stderr


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--dump":
        sys.exit("usage: jax_dumps_test.py --dump DIR   (with XLA_FLAGS=--xla_dump_to=DIR ...)")
    if "--xla_dump_to=" not in os.environ.get("XLA_FLAGS", ""):
        os.execve(sys.executable, [sys.executable, *sys.argv], dump_env(sys.argv[2]))
    dump_programs(sys.argv[2])
else:
    from conftest import server, world  # noqa: E402,F401  (fixtures)
