"""Graphs as numpy arrays: TpuGraphs npz files, validation, the wire encoding and the
content hash the server keys graphs by (the same bytes as model/core/graph.cc's
GraphContentHash, so the C++ and Python clients and the server agree on every graph)."""
import hashlib
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ._errors import file_error, invalid

NODE_FEAT_DIM = 140      # node_feat columns (docs/format.md)
LAYOUT_CONFIG_DIM = 18   # values per configurable node in a layout configuration
TILE_CONFIG_DIM = 24     # values per tile configuration
MAX_OPCODE = 120         # HLO opcode ids 0..120 (docs/format.md)
_HASH_TAG = b"tgraph.graph.v1\n"


@dataclass
class Graph:
    """A computational graph in the TpuGraphs format.

    node_feat (n, 140) float32; node_opcode (n,) ids 0..120; edge_index (m, 2) int64,
    row [u, v] meaning u consumes v's output; node_config_ids (nc,) int64, the
    configurable nodes of a layout graph (empty for a tile graph). `configs` and
    `runtimes` hold the file's own configurations and measured runtimes (ns), if any:
    (c, nc, 18) int8 layout rows or (c, 24) float32 tile rows.
    """
    node_feat: np.ndarray
    node_opcode: np.ndarray
    edge_index: np.ndarray
    node_config_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    configs: Optional[np.ndarray] = None
    runtimes: Optional[np.ndarray] = None
    name: str = ""

    def __post_init__(self):
        what = self.name or "graph"
        self.node_feat = np.ascontiguousarray(self.node_feat, dtype=np.float32)
        if self.node_feat.ndim != 2 or self.node_feat.shape[1] != NODE_FEAT_DIM:
            raise invalid(f"{what}: node_feat must be (n, {NODE_FEAT_DIM}), got {self.node_feat.shape}")
        n = self.node_feat.shape[0]
        if n == 0:
            raise invalid(f"{what}: the graph has no nodes")
        if not np.isfinite(self.node_feat).all():
            row = int(np.argwhere(~np.isfinite(self.node_feat))[0][0])
            raise invalid(f"{what}: node_feat row {row} is not finite")
        opcode = np.asarray(self.node_opcode)
        if opcode.shape != (n,):
            raise invalid(f"{what}: node_opcode must be ({n},) like node_feat's rows, got {opcode.shape}")
        if opcode.size and (opcode.min() < 0 or opcode.max() > MAX_OPCODE):
            raise invalid(f"{what}: node_opcode values must be 0..{MAX_OPCODE}, got {opcode.min()}..{opcode.max()}")
        self.node_opcode = opcode.astype(np.int32)
        edges = np.ascontiguousarray(self.edge_index, dtype=np.int64)
        self.edge_index = edges.reshape(0, 2) if edges.size == 0 else edges
        if self.edge_index.ndim != 2 or self.edge_index.shape[1] != 2:
            raise invalid(f"{what}: edge_index must be (m, 2), got {self.edge_index.shape}")
        if self.edge_index.size and (self.edge_index.min() < 0 or self.edge_index.max() >= n):
            raise invalid(f"{what}: edge_index values must be node ids 0..{n - 1}")
        self.node_config_ids = np.ascontiguousarray(self.node_config_ids, dtype=np.int64).reshape(-1)
        if self.node_config_ids.size and (self.node_config_ids.min() < 0 or self.node_config_ids.max() >= n):
            raise invalid(f"{what}: node_config_ids values must be node ids 0..{n - 1}")

    @property
    def num_nodes(self) -> int:
        return int(self.node_feat.shape[0])

    @property
    def num_config_nodes(self) -> int:
        return int(self.node_config_ids.size)

    @property
    def content_hash(self) -> str:
        """The graph's content hash (64 hex digits), as the server computes it."""
        h = hashlib.sha256(_HASH_TAG)
        h.update(np.uint64(self.num_nodes).astype("<u8").tobytes())
        # -0.0 hashes as +0.0, so that equal values always hash equally.
        feat = np.where(self.node_feat == 0, np.float32(0), self.node_feat).astype("<f4")
        h.update(feat.tobytes())
        h.update(self.node_opcode.astype("<i4").tobytes())
        h.update(np.uint64(self.edge_index.shape[0]).astype("<u8").tobytes())
        h.update(self.edge_index.astype("<i8").tobytes())
        h.update(np.uint64(self.node_config_ids.size).astype("<u8").tobytes())
        h.update(self.node_config_ids.astype("<i8").tobytes())
        return h.hexdigest()

    def to_proto(self, message):
        """Fills a tgraph.v1.Graph message (little-endian, row-major; opcodes as bytes)."""
        message.num_nodes = self.num_nodes
        message.node_feat = self.node_feat.astype("<f4").tobytes()
        message.node_opcode = self.node_opcode.astype(np.uint8).tobytes()
        message.edge_index = self.edge_index.astype("<i8").tobytes()
        message.node_config_ids.extend(int(i) for i in self.node_config_ids)
        return message


def load_graph(path) -> Graph:
    """Reads a TpuGraphs npz file (layout or tile; real files store some arrays in
    Fortran order, which numpy reads transparently). Errors name the file and key."""
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        raise file_error(path, e) from None
    except Exception as e:  # zipfile.BadZipFile, ValueError, OSError: not an npz
        raise invalid(f"{path}: not a readable npz file ({e})") from None
    for key in ("node_feat", "node_opcode", "edge_index"):
        if key not in arrays:
            raise invalid(f"{path}: key '{key}' is missing (keys: {', '.join(sorted(arrays))})")
    name = os.path.basename(path)
    if "node_config_ids" in arrays:  # a layout graph
        ids = arrays["node_config_ids"].reshape(-1)
        configs = arrays.get("node_config_feat")
        if configs is not None:
            if configs.ndim != 3 or configs.shape[1:] != (ids.size, LAYOUT_CONFIG_DIM):
                raise invalid(f"{path}: node_config_feat must be (c, {ids.size}, {LAYOUT_CONFIG_DIM}), "
                              f"got {configs.shape}")
            configs = np.ascontiguousarray(configs, dtype=np.int8)
    else:
        ids = np.zeros(0, np.int64)
        configs = arrays.get("config_feat")
        if configs is not None:
            configs = np.ascontiguousarray(configs, dtype=np.float32)
    runtimes = arrays.get("config_runtime")
    return Graph(arrays["node_feat"], arrays["node_opcode"], arrays["edge_index"], ids, configs,
                 None if runtimes is None else np.asarray(runtimes, np.int64).reshape(-1), name)

