"""XLA's Triton GEMM fusions end to end: the real JAX MLP dump after XLA's GPU passes
(tests/data/real/hlo/jax), three programs' worth, with autotuning logs written here with
XLA's own messages (tests/xla_protos.py: the installed jaxlib's descriptors), binary and
as text (no GPU has written one for this project yet: the times are a formula's,
synthetic), become a tile collection of one's own split by program (tgraph-featurize
fusions --collection), which tgraph-train trains, tgraph-eval evaluates and a real
tgraph-server ranks; tgraph-client xla-gpu then writes the shortlist XLA's autotuner
measures, which XLA's own TritonGemmConfigsProto reads.

Run by ctest (xla_fusions) with pytest; the server fixtures are the Python client's.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.environ.get("TGRAPH_SOURCE_DIR", "."), "client", "python", "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import REAL, SRC, Server, binary, tile_server  # noqa: E402,F401  (a fixture)
from conftest import run as run_strings  # noqa: E402


def run(cmd, **kw):
    return run_strings([str(c) for c in cmd], **kw)

DUMP = os.path.join(REAL, "hlo", "jax", "mlp_train_step.sm_9.0a_gpu_after_optimizations.txt")
FUSIONS = {  # name -> (batch, M, N, K), as the dump's fusions are (tests/gemm_fusions_test.cc)
    "gemm_fusion_dot.2": (8, 128, 512, 100), "gemm_fusion_dot.3": (16, 128, 10, 32),
    "gemm_fusion_dot_general.8": (1, 128, 512, 10), "gemm_fusion_dot": (1, 784, 512, 128),
    "gemm_fusion_dot.1": (1, 512, 10, 128)}
CANDIDATES = [(m, n, k, s) for m in (16, 32, 64, 128) for n in (16, 32, 64) for k in (16, 32, 64) for s in (1, 2, 3)]


def synthetic_ns(problem, tile, program):
    """A runtime a GPU might give: waves of programs over 132 SMs, each as long as its
    tile's work, wasted work where tiles overhang, stages hiding latency; per program a
    scale, so programs differ."""
    batch, m, n, k = problem
    bm, bn, bk, stages = tile
    programs = batch * math.ceil(m / bm) * math.ceil(n / bn)
    waves = math.ceil(programs / 132)
    per_program = bm * bn * math.ceil(k / bk) * bk / 4096 + 2.0 * math.ceil(k / bk) / stages
    return int(1000 * (1 + 0.1 * program) * (2 + waves * per_program))


def write_logs(path, program, text):
    """Every candidate of every fusion timed, and a library algorithm, as XLA's
    AutotuningLogs; the fusion named by the packed instruction in binary, by fusion_name
    in text (where XLA expands the Any)."""
    from google.protobuf import text_format
    import xla_protos
    logs = xla_protos.message("xla.AutotuningLogs")
    for name, problem in FUSIONS.items():
        log = logs.logs.add()
        if text:
            log.fusion_name = name
        else:
            log.instr.type_url = "type.googleapis.com/xla.HloInstructionProto"
            log.instr.value = b"\x0a" + bytes([len(name)]) + name.encode()  # HloInstructionProto.name (field 1)
        for tile in CANDIDATES:
            bm, bn, bk, stages = tile
            r = log.results.add()
            r.triton.block_m, r.triton.block_n, r.triton.block_k, r.triton.split_k = bm, bn, bk, 1
            r.triton.num_stages, r.triton.num_warps, r.triton.num_ctas = stages, 4, 1
            r.run_time.FromNanoseconds(synthetic_ns(problem, tile, program))
        r = log.results.add()
        r.gemm.algorithm = 1
        r.run_time.FromNanoseconds(9000)
        f = log.results.add()
        f.failure.kind = 3  # DISQUALIFIED
        f.failure.msg = "spilled registers"
    if text:
        open(path, "w").write(text_format.MessageToString(logs))
    else:
        open(path, "wb").write(logs.SerializeToString())


def table_of_one(path):
    """The fusion table at `path` with its first fusion's line only."""
    return "".join(open(path).read().splitlines(keepends=True)[:2])


def run_failing(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, (r.stdout, r.stderr)
    return r


def test_three_programs_fusions_with_their_logs_train_evaluate_and_rank(tmp_path):
    featurize = binary("model", "hlo", "tgraph-featurize")
    root = tmp_path / "data"
    text = open(DUMP).read()
    for program, split in enumerate(("train", "valid", "test")):
        module = tmp_path / f"step{program}.txt"
        module.write_text(text.replace("HloModule jit_step", f"HloModule jit_step{program}", 1))
        logs = tmp_path / (f"logs{program}.txt" if program == 2 else f"logs{program}.pb")
        write_logs(logs, program, text=program == 2)
        out = run([featurize, "fusions", "--in", module, "--logs", logs, "--collection", "tile@test-xla",
                   "--split", split, "--out_root", root])
        assert "5 Triton matrix-product fusions" in out.stdout
    split_dir = root / "npz" / "tile" / "@test-xla"
    for program, split in enumerate(("train", "valid", "test")):
        names = sorted(os.listdir(split_dir / split))
        # A program's fusions all in its split, named after it; its table beside them.
        assert names == sorted([f"jit_step{program}.{f}.npz" for f in FUSIONS] + [f"jit_step{program}.fusions.tsv"])
    with np.load(split_dir / "train" / "jit_step0.gemm_fusion_dot.2.npz") as z:
        assert z["config_feat"].shape == (len(CANDIDATES), 24)
        assert z["config_runtime"][0] == synthetic_ns(FUSIONS["gemm_fusion_dot.2"], CANDIDATES[0], 0)
        assert (z["config_runtime_normalizers"] == 9000).all()  # the library's time
    table = (split_dir / "train" / "jit_step0.fusions.tsv").read_text().splitlines()
    row = dict(zip(table[0].split("\t"), table[1].split("\t")))
    assert (row["measured"], row["failed"], row["library_ns"]) == (str(len(CANDIDATES)), "1", "9000")

    registry = tmp_path / "registry"
    run([binary("model", "train", "tgraph-train"), "--data", root, "--collection", "tile@test-xla", "--run_dir",
         tmp_path / "run", "--registry", registry, "--profile", "quick", "--folds", "2", "--epochs", "3",
         "--threads", "2", "--progress=false"])
    ev = run([binary("model", "train", "tgraph-eval"), "--data", root, "--collection", "tile@test-xla",
              "--registry", registry, "--split", "test"])
    assert "jit_step2.gemm_fusion_dot.2" in ev.stdout, ev.stdout
    # Beside the model, the orders without one, learned from the train and valid programs.
    ev = run([binary("model", "train", "tgraph-eval"), "--data", root, "--collection", "tile@test-xla",
              "--registry", registry, "--split", "test", "--baselines", "--json"])
    methods = {m["method"]: m["report"] for m in json.loads(ev.stdout)["methods"]}
    # XLA's choices in the dump: three of them among the logged candidates (16x8x16 w2
    # and 64x16x128 are not).
    choice = methods["XLA's choice (measured in 3 of 5), then mean slowdown"]
    assert {"nearest problem", "mean slowdown", "random order (expected)"} < set(methods)
    assert len(choice["graphs"]) == len(FUSIONS)
    graph = {g["graph"]: g for g in choice["graphs"]}["jit_step2.gemm_fusion_dot.2"]
    problem = FUSIONS["gemm_fusion_dot.2"]
    fastest = min(synthetic_ns(problem, t, 2) for t in CANDIDATES)
    assert graph["top1_error"] == pytest.approx(synthetic_ns(problem, (64, 32, 64, 1), 2) / fastest - 1)
    # A fusion graph whose table is gone has no problem to compare: said before any scoring.
    os.rename(split_dir / "test" / "jit_step2.fusions.tsv", tmp_path / "kept.tsv")
    (split_dir / "test" / "jit_step2.fusions.tsv").write_text(table_of_one(tmp_path / "kept.tsv"))
    r = run_failing([binary("model", "train", "tgraph-eval"), "--data", root, "--collection", "tile@test-xla",
                     "--registry", registry, "--split", "test", "--baselines"])
    assert ".npz: no fusion table of its folder lists it" in r.stderr, r.stderr
    os.replace(tmp_path / "kept.tsv", split_dir / "test" / "jit_step2.fusions.tsv")

    server = Server(str(registry), str(tmp_path))
    try:
        import tgraph
        client = tgraph.Client(server.address)
        ranked = client.rank("tile@test-xla", str(split_dir / "test" / "jit_step2.gemm_fusion_dot.npz"))
        assert sorted(ranked.order.tolist()) == list(range(len(CANDIDATES)))

        # The hand-off: each fusion's XLA choice, then the model's best 2 of tgraph's
        # candidates (split_k 1: what XLA's newer autotuner takes), as XLA reads them;
        # the flags the user's own, then the file's absolute path.
        override = tmp_path / "override.textproto"
        out = run([binary("client", "tgraph-client"), "xla-gpu", "--server", server.address, "--collection",
                   "tile@test-xla", "--hlo", DUMP, "--out", override, "--json"],
                  env=dict(os.environ, XLA_FLAGS="--xla_dump_to=/tmp/d"))
        report = json.loads(out.stdout)
        assert report["ranked_by"] == "the fusion model tile@test-xla"
        assert [f["fusion"] for f in report["fusions"]] == list(FUSIONS)
        assert all(len(f["shortlist"]) == 3 and f["shortlist"][0] == f["xla_chose"] for f in report["fusions"])
        assert all(" sk1 " in c for f in report["fusions"] for c in f["shortlist"])
        assert report["xla_flags"] == f"--xla_dump_to=/tmp/d --xla_gpu_gemm_autotuner_override_file={override}"
    finally:
        server.stop()
    from google.protobuf import text_format
    import xla_protos
    listed = text_format.Parse(override.read_text(), xla_protos.message("xla.TritonGemmConfigsProto"))
    assert len(listed.config) == report["candidates"] <= 15
    assert {f"{c.block_m}x{c.block_n}x{c.block_k} sk{c.split_k} s{c.num_stages} w{c.num_warps} c{c.num_ctas}"
            for c in listed.config} == {b for f in report["fusions"] for b in f["shortlist"]}
    # XLA's choices lead the list, in the module's order.
    chosen = list(dict.fromkeys(f["xla_chose"] for f in report["fusions"]))
    assert [f"{c.block_m}x{c.block_n}x{c.block_k} sk{c.split_k} s{c.num_stages} w{c.num_warps} c{c.num_ctas}"
            for c in listed.config][:len(chosen)] == chosen


def test_xla_gpu_without_a_fusion_model_ranks_with_the_gpus_triton_tile_model_and_keeps_xlas_choices(
        tile_server, tmp_path):
    """No fusion model on the server: its Triton tile model (tile@h100-triton) ranks each
    fusion's matrix product over XLA's configurations where the two agree; a problem its
    space never measured keeps XLA's choice alone, said in a note."""
    override = tmp_path / "override.textproto"
    r = subprocess.run([binary("client", "tgraph-client"), "xla-gpu", "--server", tile_server.address, "--hlo", DUMP,
                        "--out", str(override), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "no --collection given: ranking with the GPU's Triton tile model tile@h100-triton" in r.stderr
    report = json.loads(r.stdout)
    assert report["ranked_by"].startswith("the Triton tile model tile@h100-triton (NVIDIA H100 80GB HBM3)")
    by_name = {f["fusion"]: f for f in report["fusions"]}
    assert all(f["shortlist"][0] == f["xla_chose"] for f in report["fusions"])
    # 784x512x128 (f32, every size a multiple of 16) is the Triton space's: 3 listed, each
    # with split_k 1 and one CTA; the other four are variants it never measured.
    ranked = by_name["gemm_fusion_dot"]["shortlist"]
    assert len(ranked) == 3 and all(" sk1 " in c and c.endswith(" c1") for c in ranked)
    assert len(report["notes"]) == 4 and all(n.endswith(": XLA's choice alone") for n in report["notes"])
    assert all(len(by_name[n]["shortlist"]) == 1 for n in by_name if n != "gemm_fusion_dot")
    # Named: no warning, and --per_fusion as asked.
    r = subprocess.run([binary("client", "tgraph-client"), "xla-gpu", "--server", tile_server.address, "--hlo", DUMP,
                        "--out", str(tmp_path / "o.textproto"), "--collection", "tile@h100-triton", "--per_fusion",
                        "5", "--json"], capture_output=True, text=True)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    again = {f["fusion"]: f["shortlist"] for f in json.loads(r.stdout)["fusions"]}
    assert len(again["gemm_fusion_dot"]) == 5 and again["gemm_fusion_dot"][:3] == ranked


# Today's XLA nests each dot operand in a fusion of its own with its tile (BLOCK_K is the
# lhs tile's contracting size when the dot has no "sizes"), and XLA's tests write backend
# configs with unquoted keys, which XLA's JSON reader takes.
NESTED = """HloModule nested

lhs_tile {
  a = f32[64,8,128]{2,1,0} parameter(0)
  ROOT n = f32[64,8,128]{2,1,0} negate(a)
}

rhs_tile {
  b = f32[128,8,256]{2,1,0} parameter(0)
  ROOT m = f32[128,8,256]{2,1,0} abs(b)
}

gemm {
  p0 = f32[64,8,128]{2,1,0} parameter(0)
  p1 = f32[128,8,256]{2,1,0} parameter(1)
  l = f32[64,8,128]{2,1,0} fusion(p0), kind=kCustom, calls=lhs_tile, backend_config={fusion_backend_config:{kind:"__triton_nested_gemm_fusion", block_level_fusion_config:{output_tiles:[{sizes:["32","1","64"]}]}}}
  r = f32[128,8,256]{2,1,0} fusion(p1), kind=kCustom, calls=rhs_tile, backend_config={fusion_backend_config:{kind:"__triton_nested_gemm_fusion", block_level_fusion_config:{output_tiles:[{sizes:["64","1","128"]}]}}}
  ROOT d = f32[8,64,256]{2,1,0} dot(l, r), lhs_contracting_dims={2}, rhs_contracting_dims={0}, lhs_batch_dims={1}, rhs_batch_dims={1}
}

ENTRY main {
  x = f32[64,8,128]{2,1,0} parameter(0)
  y = f32[128,8,256]{2,1,0} parameter(1)
  ROOT f = f32[8,64,256]{2,1,0} fusion(x, y), kind=kCustom, calls=gemm, backend_config={fusion_backend_config:{kind:"__triton_nested_gemm_fusion", block_level_fusion_config:{output_tiles:[{sizes:["1","32","128"]}], num_warps:"8", num_ctas:1, num_stages:3}}}
}
"""


def test_nested_operand_fusions_read_alike_from_the_text_and_from_xlas_proto_of_it(tmp_path):
    from jax._src.lib import xla_client
    featurize = binary("model", "hlo", "tgraph-featurize")
    (tmp_path / "m.hlo").write_text(NESTED)
    (tmp_path / "m.hlo.pb").write_bytes(xla_client.hlo.hlo_module_from_text(NESTED).as_serialized_hlo_module_proto())
    tables = []
    for name in ("m.hlo", "m.hlo.pb"):
        out = run([featurize, "fusions", "--in", tmp_path / name, "--out_dir", tmp_path / (name + ".out")])
        assert "1 Triton matrix-product fusion " in out.stdout  # the operands' nested fusions are not GEMMs
        tables.append((tmp_path / (name + ".out") / "fusions.tsv").read_text())
        assert "f: f32 x f32 -> f32 8x64x256x128, chosen 32x128x64 sk1 s3 w8 c1, 9 nodes" in out.stderr, out.stderr
    assert tables[0] == tables[1]
    assert (tmp_path / "m.hlo.out" / "f.npz").read_bytes() == (tmp_path / "m.hlo.pb.out" / "f.npz").read_bytes()


# An fp8 product (e4m3 by e5m2, bf16 out) and a block-scaled one (scaled-dot: its scales
# operands 2 and 3), each a nested GEMM fusion.
NARROW = """HloModule narrow

fp8_gemm {
  x = f8e4m3fn[512,256]{1,0} parameter(0)
  y = f8e5m2[256,128]{1,0} parameter(1)
  ROOT d = bf16[512,128]{1,0} dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}, backend_config={"sizes":["128"]}
}

scaled_gemm {
  a = f8e4m3fn[256,512]{1,0} parameter(0)
  b = f8e4m3fn[512,64]{1,0} parameter(1)
  as = f8e8m0fnu[256,16]{1,0} parameter(2)
  bs = f8e8m0fnu[16,64]{1,0} parameter(3)
  ROOT p = bf16[256,64]{1,0} scaled-dot(a, b, as, bs), lhs_contracting_dims={1}, rhs_contracting_dims={0}, backend_config={"sizes":["64"]}
}

ENTRY main {
  x = f8e4m3fn[512,256]{1,0} parameter(0)
  y = f8e5m2[256,128]{1,0} parameter(1)
  a = f8e4m3fn[256,512]{1,0} parameter(2)
  b = f8e4m3fn[512,64]{1,0} parameter(3)
  as = f8e8m0fnu[256,16]{1,0} parameter(4)
  bs = f8e8m0fnu[16,64]{1,0} parameter(5)
  f = bf16[512,128]{1,0} fusion(x, y), kind=kCustom, calls=fp8_gemm, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{"output_tiles":[{"sizes":["64","128"]}],"num_warps":"4","num_stages":3,"num_ctas":1}}}
  g = bf16[256,64]{1,0} fusion(a, b, as, bs), kind=kCustom, calls=scaled_gemm, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{"output_tiles":[{"sizes":["128","64"]}],"num_warps":"8","num_stages":2,"num_ctas":1}}}
  ROOT t = (bf16[512,128]{1,0}, bf16[256,64]{1,0}) tuple(f, g)
}
"""


def test_narrow_typed_and_block_scaled_fusions_read_alike_from_the_text_and_from_xlas_proto_of_it(tmp_path):
    from jax._src.lib import xla_client
    featurize = binary("model", "hlo", "tgraph-featurize")
    (tmp_path / "n.hlo").write_text(NARROW)
    (tmp_path / "n.hlo.pb").write_bytes(xla_client.hlo.hlo_module_from_text(NARROW).as_serialized_hlo_module_proto())
    tables = []
    for name in ("n.hlo", "n.hlo.pb"):
        out = run([featurize, "fusions", "--in", tmp_path / name, "--out_dir", tmp_path / (name + ".out")])
        assert "f: f8e4m3fn x f8e5m2 -> bf16 512x128x256, chosen 64x128x128 sk1 s3 w4 c1, 3 nodes" in out.stderr, out.stderr
        assert "g: f8e4m3fn x f8e4m3fn -> bf16 256x64x512, chosen 128x64x64 sk1 s2 w8 c1, 5 nodes" in out.stderr, out.stderr
        tables.append((tmp_path / (name + ".out") / "fusions.tsv").read_text())
    assert tables[0] == tables[1]
    for npz in ("f.npz", "g.npz"):
        assert (tmp_path / "n.hlo.out" / npz).read_bytes() == (tmp_path / "n.hlo.pb.out" / npz).read_bytes()


def test_collect_xla_gpu_builds_compiles_dumps_and_times_its_programs_on_the_cpu(tmp_path):
    """The device script, run here on the CPU (no Triton, no autotuning): each program
    builds, compiles in a process of its own under both modes' flags, dumps its module
    after XLA's passes and is timed, and the archive holds what a GPU run sends back."""
    script = os.path.join(SRC, "scripts", "collect-xla-gpu")
    r = subprocess.run([sys.executable, script, "--out", tmp_path, "--platform", "cpu", "--programs",
                        "mlp:s,decoder_bf16:s,attention:s,moe:s"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    import tarfile
    with tarfile.open(tmp_path / "xla-gpu.tar.gz") as t:
        names = set(t.getnames())
        manifest = json.load(t.extractfile("xla-gpu/manifest.json"))
    for program in ("mlp_s", "decoder_bf16_s", "attention_s", "moe_s"):
        assert {f"xla-gpu/{program}/autotuned.after_optimizations.txt", f"xla-gpu/{program}/autotuned.after_optimizations.hlo.pb",
                f"xla-gpu/{program}/heuristic.after_optimizations.txt"} <= names, names
    assert manifest["provenance"]["platform"] == "cpu" and manifest["provenance"]["jax"]
    assert "--xla_gpu_exhaustive_tiling_search=true" in manifest["flags"]["autotuned"]
    assert "--xla_gpu_autotune_level=0" in manifest["flags"]["heuristic"]
    for program in ("mlp:s", "decoder_bf16:s", "attention:s", "moe:s"):
        for mode in ("autotuned", "heuristic"):
            result = manifest["programs"][program][mode]
            assert result["compile_s"] > 0 and result["step_ms_median"] >= result["step_ms_min"] > 0, result
    # A program it does not have is refused before anything runs.
    bad = subprocess.run([sys.executable, script, "--out", tmp_path, "--programs", "mlp:xl"], capture_output=True, text=True)
    assert bad.returncode == 2 and "'mlp:xl' is not a PROGRAM:SIZE of --list" in bad.stderr


def collected_archive(tmp_path):
    """What scripts/collect-xla-gpu would bring back from three programs: the real dump
    (renamed per program) with logs of a formula's times, and a heuristic compilation
    whose gemm_fusion_dot.2 chose another tile."""
    import tarfile
    text = open(DUMP).read()
    root = tmp_path / "stage" / "xla-gpu"
    for number, program in enumerate(("mlp_s", "resnet_s", "decoder_bf16_s")):
        d = root / program
        d.mkdir(parents=True)
        (d / "autotuned.after_optimizations.txt").write_text(text.replace("HloModule jit_step", f"HloModule jit_{program}", 1))
        write_logs(d / "autotune_logs.pb", number, text=False)
        (d / "heuristic.after_optimizations.txt").write_text(
            text.replace('"output_tiles":[{"sizes":["1","64","32"]}]', '"output_tiles":[{"sizes":["1","32","32"]}]'))
    (root / "manifest.json").write_text(json.dumps({"provenance": {"platform": "gpu"}}))
    archive = tmp_path / "xla-gpu.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        t.add(root, arcname="xla-gpu")
    return archive


def test_xla_gpu_fusions_trains_the_fused_graphs_and_the_lone_dots_and_judges_both_on_held_out_programs(tmp_path):
    work = tmp_path / "work"
    env = dict(os.environ, SKIP_BUILD="1", BUILD_DIR=os.environ.get("TGRAPH_BIN_DIR", "build"), EPOCHS="3",
               FOLDS_TRAINED="1", NAME="test-xla")
    r = subprocess.run([os.path.join(SRC, "scripts", "xla-gpu-fusions"), collected_archive(tmp_path), work],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "mlp_s -> train" in out and "resnet_s -> valid" in out and "decoder_bf16_s -> test" in out, out
    for collection in ("tile@test-xla", "tile@test-xla-dot"):
        assert f"{collection} test: 5 problems" in out, out
    # Each collection's two tables (medians, the worst problem) name it.
    assert out.count("XLA's choice (measured in 3 of 5), then mean slowdown") == 2 * 2, out
    split = work / "data" / "npz" / "tile"
    # The lone dots: the same rows, three nodes each; the fused graphs as the dump has them.
    with np.load(split / "@test-xla-dot" / "test" / "jit_decoder_bf16_s.gemm_fusion_dot.3.npz") as z, \
            np.load(split / "@test-xla" / "test" / "jit_decoder_bf16_s.gemm_fusion_dot.3.npz") as f:
        assert z["node_feat"].shape[0] == 3 and f["node_feat"].shape[0] == 9
        assert (z["config_feat"] == f["config_feat"]).all() and (z["config_runtime"] == f["config_runtime"]).all()
    # XLA's choice is the heuristic compilation's (--chosen_from): gemm_fusion_dot.2 chose 32x32.
    table = (split / "@test-xla" / "test" / "jit_decoder_bf16_s.fusions.tsv").read_text().splitlines()
    rows = {dict(zip(table[0].split("\t"), l.split("\t")))["fusion"]: dict(zip(table[0].split("\t"), l.split("\t")))
            for l in table[1:]}
    assert rows["gemm_fusion_dot.2"]["chosen"] == "32x32x64 sk1 s1 w4 c1"
    assert rows["gemm_fusion_dot.3"]["chosen"] == "64x16x32 sk1 s1 w4 c1"
