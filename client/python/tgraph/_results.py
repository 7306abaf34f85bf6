"""What the client's calls take and return: graphs as HLO modules, a registration's
configurable nodes, rankings, proposals, receipts and model descriptions."""
import hashlib
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from ._errors import file_error, invalid
from ._graph import LAYOUT_CONFIG_DIM, Graph


GROUP_NAMES = ("output", "input", "kernel")


@dataclass
class LayoutGroup:
    """One layout group of a configurable node (docs/api.md, "The layout search space").
    rank: of the group's tensor; a legal group lists distinct dimensions below it,
    minor-to-major, then -1s, or is all -1 (the compiler default); 0 means the node has
    no such tensor. candidates: (k, 6) int8, the layouts an autotuner tries, row 0 the
    default."""
    name: str
    rank: int
    candidates: np.ndarray


@dataclass
class ConfigurableNode:
    """A configurable node, in configuration-row order (names empty for array graphs),
    with its output, input and kernel LayoutGroups."""
    node: int
    opcode: str
    instruction: str
    computation: str
    groups: List[LayoutGroup] = field(default_factory=list)


def _group_problem(values: Sequence[int], rank: int) -> str:
    """Why a group's dimensions (minor-to-major) are not legal for a tensor of `rank`
    ("" when they are): the server's rule (model/core/layout_space.h)."""
    if values and rank == 0:
        return "this node has no such tensor: the group must be all -1 (the compiler default)"
    seen = set()
    for d in values:
        if not 0 <= d < rank:
            return f"dimension {d} is not a dimension of the rank-{rank} tensor (expected 0..{rank - 1})"
        if d in seen:
            return f"dimension {d} appears twice"
        seen.add(d)
    return ""


@dataclass
class Registration:
    graph_hash: str
    num_nodes: int
    pruned_nodes: int
    already_registered: bool
    configurable_nodes: List[ConfigurableNode]
    warnings: List[str]

    def layout_row(self, layouts: dict) -> np.ndarray:
        """One configuration row, (nc, 18) int8, from per-node layouts: keys are
        instruction names (graphs registered from HLO) or node indices (node_config_ids
        entries), values up to three minor-to-major dimension lists (output, input,
        kernel; a shorter list leaves the rest to the compiler, [] for a group keeps its
        default). Nodes not named keep the compiler's default (-1). Raises TgraphError
        (INVALID_ARGUMENT) naming the node and group for a key that is not a configurable
        node or a layout the server would refuse."""
        by_key = {}
        for row, c in enumerate(self.configurable_nodes):
            by_key[c.node] = row
            if c.instruction:
                by_key[c.instruction] = row
        out = np.full((len(self.configurable_nodes), LAYOUT_CONFIG_DIM), -1, dtype=np.int8)
        for key, tensors in layouts.items():
            if key not in by_key:
                raise invalid(f"{key!r} is not a configurable node of graph {self.graph_hash[:12]} (its "
                              "convolution, dot and reshape nodes, by instruction name or node index)")
            row = by_key[key]
            node = self.configurable_nodes[row]
            if len(tensors) > len(GROUP_NAMES):
                raise invalid(f"{key!r}: {len(tensors)} tensor layouts; at most 3 (output, input, kernel)")
            for g, dims in enumerate(tensors):
                dims = [int(d) for d in dims]
                rank = node.groups[g].rank if node.groups else 6
                why = _group_problem(dims, rank) if len(dims) <= 6 else "more than 6 dimensions"
                if why:
                    raise invalid(f"{key!r} (row {row}), {GROUP_NAMES[g]} group {dims}: {why}")
                out[row, g * 6:g * 6 + len(dims)] = dims
        return out


@dataclass
class EntryLayout:
    """A choice of an applied row that a stock XLA takes as written: the layout of an
    argument (an entry parameter) or of the result. `jax` is the form jax.jit takes it in
    (in_shardings / out_shardings), e.g. "Format(Layout(major_to_minor=(1, 0)), sharding)"."""
    result: bool           # the program's result; else an argument
    index: int             # the argument's number; the result's tuple element (-1: the whole result)
    name: str              # the argument's name in the program (e.g. "x", "p[0][0]"), else its instruction
    shape: str             # e.g. "f32[128,784]"
    minor_to_major: List[int]
    asked_by: str          # the configurable instruction and group, e.g. "dot_general.5 input"
    jax: str


@dataclass
class AppliedLayouts:
    """A layout row written into a module's HLO text (Client.apply): `text` the module
    with the row's layouts (and copies where an operand's layout must change), what
    changed, which choices a stock XLA takes as written (`entry_layouts`) and which need a
    compiler hook (`needs_hook`, docs/api.md "Handing a row to XLA")."""
    text: str
    layouts_written: int
    copies: int
    changes: List[str]
    entry_layouts: List[EntryLayout]
    needs_hook: List[str]


@dataclass
class Proposals:
    """SearchConfigs' answer: configs (k, nc, 18) int8, best first, with their scores by
    every fold against the search's reference (lower = predicted faster) and spread;
    what the search ran (evaluations by its fitness fold, generations, the reference's
    size)."""
    configs: np.ndarray
    scores: np.ndarray
    spread: np.ndarray
    model_version: int
    evaluations: int
    generations: int
    reference_configs: int
    timing: dict
    registrations: int = 0
    correction_measurements: int = 0  # measured runtimes the scores were corrected with
    correction_weight: float = 0.0  # their weight beside the model's scores: 3, less where the model predicts them
    max_changed_groups: int = 0  # the trust region the search ran with (0: the whole space)
    # the last num_variation configs are random variation of the fastest measured rows, not
    # the model's picks: the measured runtimes had stopped improving (exclude_runtimes_ns)
    num_variation: int = 0
    # the reference the scores were computed against, (reference_configs, nc, 18) int8:
    # rank(..., reference=it) scores the same rows the same (before any correction)
    reference: Optional[np.ndarray] = None
    # search(include_stored=True): the store's measured rows of the graph that joined
    # exclude (and their runtimes, the correction's) besides those given
    stored_measurements: int = 0
    # ... and the graph's reports older than the 64 newest the join read (rows measured
    # only there are not excluded unless given)
    older_stored_reports: int = 0
    # the start rows the search ran from: start's, or with stored rows joined and no start
    # given, the fastest measured (16 at most)
    start_configs: int = 0


@dataclass
class TileProposals:
    """SearchConfigs' answer for a tile kernel: every legal configuration of its problem
    not excluded was scored; tiles names the best (e.g. "128x128x64 w4 s3": BLOCK_M x
    BLOCK_N x BLOCK_K, warps, stages), best first, configs their rows (k, 24) float32 as
    rank() takes them, with their scores (lower = predicted faster) and the folds'
    spread; evaluations: the configurations scored; correction_measurements: the
    distinct measured configurations the prior followed (0 without runtimes, or with
    fewer than two)."""
    tiles: List[str]
    configs: np.ndarray
    scores: np.ndarray
    spread: np.ndarray
    model_version: int
    evaluations: int
    timing: dict
    registrations: int = 0
    correction_measurements: int = 0
    kernel_problems: int = 0  # with a kernel: its problems the store measured that the prior counted
    # With a kernel: the store's timings of this very problem, tile name -> median ns.
    measured: Dict[str, int] = field(default_factory=dict)


@dataclass
class Ranking:
    """scores: per configuration, lower = predicted faster; a configuration's score does
    not depend on the other rows, their order or batching, only on the graph, model
    version and reference (docs/api.md, "What a score means"); spread: disagreement of
    the folds (standardised scores); order: the fastest first (top_k of them);
    reference_configs: the size of the reference the scores were computed against."""
    scores: np.ndarray
    spread: np.ndarray
    order: np.ndarray
    model_version: int
    timing: dict
    registrations: int = 0  # RegisterGraph calls this ranking needed
    reference_configs: int = 0


@dataclass(frozen=True)
class TileKernel:
    """Which GPU kernel tile measurements belong to (tgraph.v1.TileKernel): its name (1-128
    of letters, digits and "_.:-") and a hash of its source (lowercase hex, or ""): two
    kernels never share measurements, nor what the prior learns of them. gpu: the GPU the
    timings ran on or the search is for, as the CUDA runtime names it ("NVIDIA H100 80GB
    HBM3"), and its compute_capability ("9.0"); "": the collection's GPU. A collection
    holds one GPU's timings: a report naming another is refused (INVALID_ARGUMENT), and a
    search joins its own GPU's measurements only."""
    name: str
    source_hash: str = ""
    gpu: str = ""
    compute_capability: str = ""

    def _into(self, message):
        message.name, message.source_hash = self.name, self.source_hash
        message.gpu, message.compute_capability = self.gpu, self.compute_capability


@dataclass
class MeasurementReceipt:
    stored: int
    shard: str
    registrations: int = 0
    already_stored: bool = False  # a retry found the report stored by an earlier attempt


@dataclass
class Provenance:
    """What a model version was trained on (tgraph.v1.Provenance)."""
    data: str  # "synthetic", "real", or "" (unknown: published before manifests recorded it)
    dataset: str  # the synthetic data's preset and seed, or the real data's root
    data_fingerprint: str
    graphs: int
    configurations: int
    finetunes: int  # fine-tunes on measurements since, and what they added
    finetune_graphs: int
    finetune_measurements: int
    synthetic_only: bool  # its rankings follow the generator's cost model, not hardware
    summary: str  # all of the above in one line


@dataclass
class TilePriorInfo:
    """How a tile model's scores are made (tgraph.v1.TilePriorInfo): network_share x the
    folds' standardised scores + weight x the prior of `problems` measured problems."""
    weight: float
    network_share: float
    problems: int


@dataclass
class ModelInfo:
    collection: str
    version: int
    loaded_versions: List[int]
    architecture: str
    hidden: int
    folds: int
    mean_valid_score: float
    created: str
    batch_size: int
    reference_configs: int  # the reference's size when a request gives none
    provenance: Provenance
    # Tile models made from real measurements: the kernel's configuration space (JSON,
    # docs/format.md "Triton tile values"; "" for other models) and the prior
    # (None: the network alone).
    tile_space: str = ""
    tile_prior: Optional[TilePriorInfo] = None


class HloModule:
    """An XLA HLO module: HLO text as XLA prints it (an XLA dump's *.txt, JAX's
    as_hlo_text()) or a serialized xla.HloProto / HloModuleProto (*.hlo.pb). The server
    featurizes it; its convolution, dot and reshape instructions are the configurable
    nodes (Client.register lists them in row order). kernel=True: the module is one GPU
    kernel (a matrix product), registered with no configurable nodes, as search_tiles and
    a tile collection's rank take it."""

    # A module has no configurations or runtimes of its own (a Graph from an npz file
    # may): candidates come from Client.search, or from your autotuner.
    configs = None
    runtimes = None

    def __init__(self, data: bytes, name: str = "hlo_module", *, kernel: bool = False):
        if isinstance(data, str):
            data = data.encode()
        if not isinstance(data, (bytes, bytearray)) or not data:
            raise invalid(f"{name}: an HLO module must be non-empty bytes or text")
        self.data = bytes(data)
        self.name = name
        # kernel: registered as one GPU kernel (no configurable nodes), what search_tiles
        # and a tile collection's rank take; another graph, so another key.
        self.kernel = bool(kernel)
        self.digest = hashlib.sha256((b"kernel\0" if self.kernel else b"") + self.data).hexdigest()

    @classmethod
    def from_file(cls, path, *, kernel: bool = False) -> "HloModule":
        path = os.fspath(path)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise file_error(path, e) from None
        return cls(data, path, kernel=kernel)


GraphLike = Union[Graph, HloModule, str, os.PathLike]
