"""The vocabulary of a matrix product's tile choice, shared by tgraph.triton and its
shortlist files: the problem (M, N, K, dtype), a candidate's tile as the model's space
names it, and the HLO of the product as the tile collections hold it."""
import re
from dataclasses import dataclass

from ._client import HloModule

# A tensor's dtype as the server names a matrix product's (torch's and Triton's spellings).
DTYPES = {"torch.bfloat16": "bf16", "bfloat16": "bf16", "bf16": "bf16", "torch.float16": "f16", "float16": "f16",
          "fp16": "f16", "f16": "f16", "torch.float32": "f32", "float32": "f32", "fp32": "f32", "f32": "f32"}
HLO_TYPES = {"bf16": "bf16", "f16": "f16", "f32": "f32"}


def gemm_module(m: int, n: int, k: int, dtype: str) -> HloModule:
    """The HLO of C[M, N] = A[M, K] B[K, N] as XLA writes jnp.dot's (the kernel's graph,
    as the tile collection's files hold it), registered as one kernel."""
    t = HLO_TYPES[dtype]
    text = (f"HloModule jit_dot, entry_computation_layout={{({t}[{m},{k}]{{1,0}}, {t}[{k},{n}]{{1,0}})->"
            f"{t}[{m},{n}]{{1,0}}}}\n\n"
            f"ENTRY main.1 {{\n"
            f"  a.1 = {t}[{m},{k}]{{1,0}} parameter(0)\n"
            f"  b.1 = {t}[{k},{n}]{{1,0}} parameter(1)\n"
            f"  ROOT dot_general.1 = {t}[{m},{n}]{{1,0}} dot(a.1, b.1), lhs_contracting_dims={{1}}, "
            f"rhs_contracting_dims={{0}}\n}}\n")
    return HloModule(text, f"gemm_{dtype}_{m}x{n}x{k}", kernel=True)


@dataclass(frozen=True)
class Tile:
    """A candidate as the model's space sees it."""
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int

    @property
    def name(self) -> str:
        return f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages}"


def parse_tile(name: str) -> Tile:
    """"128x128x64 w4 s3" (as search_tiles names them) to a Tile."""
    m = re.fullmatch(r"(\d+)x(\d+)x(\d+) w(\d+) s(\d+)", name.strip())
    if not m:
        raise ValueError(f"'{name}' is not a tile configuration (expected e.g. '128x128x64 w4 s3')")
    return Tile(*(int(g) for g in m.groups()))


@dataclass(frozen=True)
class Problem:
    m: int
    n: int
    k: int
    dtype: str  # bf16, f16, f32

    @property
    def name(self) -> str:
        return f"{self.dtype} {self.m}x{self.n}x{self.k}"
