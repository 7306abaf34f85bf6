"""Every attribute the featurizer reads, left out of a module's text where XLA's printer
leaves it out, reads as XLA's default: the text through tgraph's reader and the proto
that XLA's own parser (jaxlib's bundled one) makes of the same text give byte-identical
graphs. And each attribute is really read: the same module with a value other than the
default gives another graph.

Run by ctest (hlo_defaults) with pytest.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.environ.get("TGRAPH_SOURCE_DIR", "."), "client", "python", "tests"))
from conftest import binary  # noqa: E402


def module(body, called=""):
    """A module whose entry computation is `body`'s lines, after the computations it
    calls (each case holds a convolution or a reshape: a module with nothing to configure
    is refused)."""
    lines = "\n".join("  " + line for line in body.strip().splitlines())
    return f"HloModule defaults\n\n{called}ENTRY main {{\n{lines}\n}}\n"


MAX = "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n\n"
LESS = ("less {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
        "  ROOT c = pred[] compare(a, b), direction=LT\n}\n\n")
CONV = ("x = f32[2,8,8,4]{{3,2,1,0}} parameter(0)\n"
        "k = f32[3,3,{kin},{kout}]{{3,2,1,0}} parameter(1)\n"
        "ROOT c = f32[{n},{h},{w},{kout}]{{3,2,1,0}} convolution(x, k), window={{size=3x3 pad=1_1x1_1{window}}}, "
        "dim_labels=b01f_01io->b01f{extra}\n")


def conv(window="", extra="", kin=4, kout=8, n=2, h=8, w=8):
    return CONV.format(window=window, extra=extra, kin=kin, kout=kout, n=n, h=h, w=w)


def reduce_window(window, out):
    return "HloModule defaults\n\n" + MAX + ("ENTRY main {\n  x = f32[8,8]{1,0} parameter(0)\n  i = f32[] constant(0)\n"
                  "  r = f32[64]{0} reshape(x)\n"
                  f"  ROOT w = f32[{out}]{{1,0}} reduce-window(x, i), window={{{window}}}, to_apply=max\n}}\n")


# attribute -> (the module with it left at its default, the module with another value)
CASES = {
    "window stride": (reduce_window("size=2x2", "7,7"),
                      reduce_window("size=2x2 stride=2x2", "4,4")),
    "window padding": (reduce_window("size=2x2", "7,7"),
                       reduce_window("size=2x2 pad=1_0x0_1", "8,8")),
    "window base dilation (lhs_dilate)": (reduce_window("size=2x2", "7,7"),
                                          reduce_window("size=2x2 lhs_dilate=2x1", "14,7")),
    "window dilation (rhs_dilate)": (module(conv()), module(conv(window=" rhs_dilate=2x2", h=4, w=4))),
    "window reversal (rhs_reversal)": (module(conv()), module(conv(window=" rhs_reversal=1x0"))),
    "feature_group_count": (module(conv()), module(conv(extra=", feature_group_count=2", kin=2))),
    "batch_group_count": (module(conv(kout=2)), module(conv(extra=", batch_group_count=2", kout=2, n=1))),
    "slice stride": (module("x = f32[8,8]{1,0} parameter(0)\nr = f32[64]{0} reshape(x)\n"
                            "ROOT s = f32[4,8]{1,0} slice(x), slice={[0:4], [0:8]}"),
                     module("x = f32[8,8]{1,0} parameter(0)\nr = f32[64]{0} reshape(x)\n"
                            "ROOT s = f32[4,8]{1,0} slice(x), slice={[0:8:2], [0:8]}")),
    "pad interior": (module("x = f32[8,8]{1,0} parameter(0)\nz = f32[] constant(0)\nr = f32[64]{0} reshape(x)\n"
                            "ROOT p = f32[9,8]{1,0} pad(x, z), padding=1_0x0_0"),
                     module("x = f32[8,8]{1,0} parameter(0)\nz = f32[] constant(0)\nr = f32[64]{0} reshape(x)\n"
                            "ROOT p = f32[16,8]{1,0} pad(x, z), padding=1_0_1x0_0")),
    "sort is_stable": (module("x = f32[8,8]{1,0} parameter(0)\nr = f32[64]{0} reshape(x)\n"
                              "ROOT s = f32[8,8]{1,0} sort(x), dimensions={1}, to_apply=less", LESS),
                       module("x = f32[8,8]{1,0} parameter(0)\nr = f32[64]{0} reshape(x)\n"
                              "ROOT s = f32[8,8]{1,0} sort(x), dimensions={1}, is_stable=true, to_apply=less", LESS)),
    "iota_dimension": (module("x = f32[8,8]{1,0} parameter(0)\nr = f32[64]{0} reshape(x)\n"
                              "ROOT i = s32[8,8]{1,0} iota(), iota_dimension=0"),
                       module("x = f32[8,8]{1,0} parameter(0)\nr = f32[64]{0} reshape(x)\n"
                              "ROOT i = s32[8,8]{1,0} iota(), iota_dimension=1")),
    "layout": (module("x = f32[8,4] parameter(0)\nROOT r = f32[32] reshape(x)"),
               module("x = f32[8,4]{0,1} parameter(0)\nROOT r = f32[32] reshape(x)")),
    "custom-call group counts": (
        module("x = f32[2,8,8,4]{3,2,1,0} parameter(0)\nk = f32[3,3,4,8]{3,2,1,0} parameter(1)\n"
               "r = f32[512]{0} reshape(x)\n"
               "ROOT c = f32[2,8,8,8]{3,2,1,0} custom-call(x, k), window={size=3x3 pad=1_1x1_1}, "
               "dim_labels=b01f_01io->b01f, custom_call_target=\"conv\""),
        module("x = f32[2,8,8,4]{3,2,1,0} parameter(0)\nk = f32[3,3,2,8]{3,2,1,0} parameter(1)\n"
               "r = f32[512]{0} reshape(x)\n"
               "ROOT c = f32[2,8,8,8]{3,2,1,0} custom-call(x, k), window={size=3x3 pad=1_1x1_1}, "
               "dim_labels=b01f_01io->b01f, feature_group_count=2, custom_call_target=\"conv\"")),
}


def xla_proto(text):
    """The serialized HloModuleProto of XLA's own parse of `text`."""
    try:
        from jax._src.lib import xla_client
    except ImportError:
        pytest.fail(f"jax is missing from {sys.executable}: run scripts/install-deps --test (scripts/test-venv)")
    return xla_client.hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()


def graph(path, out):
    r = subprocess.run([binary("model", "hlo", "tgraph-featurize"), "module", "--in", path, "--out", out],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"{path}: {r.stderr}"
    with np.load(out) as z:
        return {name: z[name] for name in z.files}


def read_both(text, tmp_path, stem):
    txt, pb = tmp_path / f"{stem}.hlo", tmp_path / f"{stem}.hlo.pb"
    txt.write_text(text)
    pb.write_bytes(xla_proto(text))
    return graph(str(txt), str(tmp_path / f"{stem}.txt.npz")), graph(str(pb), str(tmp_path / f"{stem}.pb.npz"))


def differing(a, b):
    return sorted(k for k in b if a[k].shape != b[k].shape or not np.array_equal(a[k], b[k]))


@pytest.mark.parametrize("attribute", sorted(CASES))
def test_an_attribute_left_at_its_default_reads_as_xlas_default_and_another_value_reads_otherwise(attribute, tmp_path):
    at_default, other = CASES[attribute]
    from_text, from_xla = read_both(at_default, tmp_path, "default")
    assert differing(from_text, from_xla) == [], f"{attribute}: text and XLA's proto differ"
    other_text, other_xla = read_both(other, tmp_path, "other")
    assert differing(other_text, other_xla) == [], f"{attribute} (another value): text and XLA's proto differ"
    assert "node_feat" in differing(from_text, other_text), f"{attribute}: another value reads as the default"


# As XLA's test tools write a module: no HloModule line, no computation marked ENTRY (the
# last is the entry), a tuple's shape and every layout left out, a while written condition
# first, names without '%'.
XLA_TEST_STYLE = """// a module as XLA's test tools write it
cond {
  p = (f32[4,4], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=1
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (f32[4,4], s32[]) parameter(0)
  x = f32[4,4] get-tuple-element(p), index=0
  d = f32[4,4] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  i = s32[] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = tuple(d, j)
}
main {
  a = f32[4,4] parameter(0)
  z = s32[] constant(0)
  t = tuple(a, z)
  w = (f32[4,4], s32[]) while(t), condition=cond, body=body
  r = f32[4,4] get-tuple-element(w), index=0
  io = s32[4,4] iota(), iota_dimension=1
  ROOT s = f32[16] reshape(r)
}
"""


def test_a_module_as_xlas_test_tools_write_it_reads_as_xlas_parser_reads_it(tmp_path):
    from_text, from_xla = read_both(XLA_TEST_STYLE, tmp_path, "xla_test_style")
    assert differing(from_text, from_xla) == []
    assert from_text["node_feat"].shape[0] == 18


CONSTRUCTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "constructs")


@pytest.mark.parametrize("module", sorted(f for f in os.listdir(CONSTRUCTS) if f.endswith(".hlo")))
def test_every_construct_xlas_parser_takes_reads_as_xlas_proto_of_it_reads(module, tmp_path):
    """Hand-written modules using between them the attributes and opcodes of XLA's text
    beyond our real dumps (tests/data/constructs/README.md): one graph from the text and
    from XLA's own proto of it."""
    text = open(os.path.join(CONSTRUCTS, module)).read()
    from_text, from_xla = read_both(text, tmp_path, module[:-4])
    assert differing(from_text, from_xla) == [], f"{module}: text and XLA's proto differ"
    assert from_text["node_feat"].shape[0] > 10
