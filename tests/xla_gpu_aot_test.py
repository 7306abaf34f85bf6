"""Six JAX programs compiled by XLA for an NVIDIA H100 at test time, on a machine without
a GPU: tests/data/real/hlo/jax-h100-aot/make_dumps.py with the test environment's JAX,
its CUDA plugin (scripts/test-requirements-xla-gpu.txt, in the venv's xla-gpu/ directory
and on this test's path alone) and the H100 description beside the script, deviceless.
XLA's modules after its GPU passes, as today's install writes them, read as the fixtures
beside the script do: every Triton matrix-product fusion read (tgraph-featurize fusions
exits 0, none refused), the fusions' table and tile graphs byte for byte the fixtures',
from the text and from the proto. The fixtures stay for the C++ tests (no JAX there).

Run by ctest (xla_gpu_aot) with pytest.
"""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.environ.get("TGRAPH_SOURCE_DIR", "."), "client", "python", "tests"))
from conftest import REAL, binary  # noqa: E402

# The plugin compiles with the machine's CUDA toolkit (ptxas): a machine without one fails
# here, with XLA's own message, rather than skipping: every tgraph machine has it.

AOT = os.path.join(REAL, "hlo", "jax-h100-aot")
# Each program and its Triton matrix-product fusions.
PROGRAMS = {"decoder_bf16_infer": 13, "decoder_train": 43, "resnet_train": 3, "mlp_infer": 3, "attention_bf16": 2,
            "moe_batched": 2}
SUFFIX = ".sm_9.0a_gpu_after_optimizations."


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    plugin = os.path.join(sys.prefix, "xla-gpu")
    assert os.path.isdir(os.path.join(plugin, "jax_plugins")), (
        f"{plugin}: JAX's CUDA plugin is not installed there; run scripts/test-venv")
    out = tmp_path_factory.mktemp("h100")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [plugin] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    r = subprocess.run([sys.executable, os.path.join(AOT, "make_dumps.py"), str(out)], env=env, capture_output=True,
                       text=True, timeout=540)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def fusions(module, out_dir):
    r = subprocess.run([binary("model", "hlo", "tgraph-featurize"), "fusions", "--in", module, "--out_dir", out_dir],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr  # 3 would be "some fusions refused"
    return {name: open(os.path.join(out_dir, name), "rb").read() for name in sorted(os.listdir(out_dir))}


@pytest.mark.parametrize("program", PROGRAMS)
def test_xla_compiles_the_program_for_an_h100_without_a_gpu_and_every_fusion_reads_as_the_fixtures(
        compiled, program, tmp_path):
    for ext in ("txt", "hlo.pb"):
        fresh = fusions(os.path.join(compiled, program + SUFFIX + ext), tmp_path / ("fresh." + ext))
        fixture = fusions(os.path.join(AOT, program + SUFFIX + ext), tmp_path / ("fixture." + ext))
        assert len(fresh) == 1 + PROGRAMS[program]  # the table and a tile graph per fusion
        assert not any(line.startswith("# refused") for line in fresh["fusions.tsv"].decode().splitlines())
        assert list(fresh) == list(fixture)
        for name in fresh:
            assert fresh[name] == fixture[name], f"{program}.{ext}: {name} differs from the fixture's"
