"""Requests' rows and answers checked on the client's side, with the server's precision:
collection kinds, configuration rows against a graph, runtimes, a ranking's shape; and
the client's bounded caches."""
import collections
import re
from typing import List

import grpc
import numpy as np

from ._errors import TgraphError, invalid
from ._graph import LAYOUT_CONFIG_DIM, TILE_CONFIG_DIM, Graph
from ._results import GROUP_NAMES, ConfigurableNode


def _check_ranking(r, configs: int, top_k: int):
    """An answer callers may index without checking: a score and a spread per
    configuration sent, a ranking of distinct ones, all or the top_k. Anything else (a
    server of another version, something else on its port) is INTERNAL, never a wrong
    index."""
    want = min(top_k, configs) if top_k > 0 else configs
    if len(r.scores) != configs or len(r.spread) != configs or len(r.ranking) != want:
        raise TgraphError(grpc.StatusCode.INTERNAL,
                          f"RankConfigs: the server's answer has {len(r.scores)} scores, {len(r.spread)} spreads and a "
                          f"ranking of {len(r.ranking)} for {configs} configurations (expected {configs}, {configs} "
                          f"and {want}): is it a tgraph-server of this version?")
    if len(set(r.ranking)) != len(r.ranking) or any(i < 0 or i >= configs for i in r.ranking):
        raise TgraphError(grpc.StatusCode.INTERNAL, f"RankConfigs: the server's ranking {list(r.ranking)[:8]} holds "
                          f"an index not in [0, {configs}) or one given twice")


def _kind(collection: str) -> str:
    """layout or tile, of a dataset collection ("layout:xla:random") or a model of one's
    own ("layout@tpu-v5e"); the server checks the rest of the name."""
    kind = re.split(r"[:@]", collection, maxsplit=1)[0]
    if kind not in ("layout", "tile") or len(kind) == len(collection):
        raise invalid(f"collection: expected layout:{{xla|nlp}}:{{random|default}}, tile:xla, or a model of your own "
                      f"(layout@NAME, tile@NAME), got '{collection}'")
    return kind


def _node_label(j: int, nodes, graph) -> str:
    """How messages name configurable node j: by instruction for a module, else by node."""
    if nodes is not None and j < len(nodes):
        n = nodes[j]
        if n.instruction:
            return f"configurable node {j} ({n.opcode} '{n.instruction}')"
        return f"configurable node {j} ({n.opcode}, node {n.node})"
    if isinstance(graph, Graph) and j < graph.num_config_nodes:
        return f"configurable node {j} (node {int(graph.node_config_ids[j])})"
    return f"configurable node {j}"


class _NodeNames:
    """What row checks need of a module's configurable nodes (how many, and how to name
    each) in a few objects: tuples of strings and ints, which Python's garbage collector
    does not walk (a list of ConfigurableNode per module held millions of objects)."""

    def __init__(self, nodes):
        self.opcodes = tuple(n.opcode for n in nodes)
        self.instructions = tuple(n.instruction for n in nodes)
        self.nodes = tuple(n.node for n in nodes)

    def __len__(self):
        return len(self.nodes)

    def __getitem__(self, j):
        return ConfigurableNode(self.nodes[j], self.opcodes[j], self.instructions[j], "", [])


class _Lru(collections.OrderedDict):
    """A dict of at most `max_entries`, the least recently used dropped first."""

    def __init__(self, max_entries: int):
        super().__init__()
        self.max_entries = max_entries

    def __getitem__(self, key):
        value = super().__getitem__(key)
        self.move_to_end(key)
        return value

    def get(self, key, default=None):
        return self[key] if key in self else default

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.max_entries:
            self.popitem(last=False)


def _configs(graph, configs, kind: str, what: str = "configs", nodes=None) -> np.ndarray:
    """The configurations as the wire wants them, checked against the graph: layout rows
    of whole numbers in -1..5 (a float row is taken when its values are whole, as
    tgraph-client takes an .npy of floats), errors naming the row, node and slot."""
    if configs is None:
        configs = getattr(graph, "configs", None)
        if configs is None:
            raise invalid(f"{what}: none given, and the graph has no configurations of its own")
    configs = np.asarray(configs)
    if kind == "layout":
        nc = graph.num_config_nodes if isinstance(graph, Graph) else (len(nodes) if nodes is not None else None)
        if configs.ndim != 3 or configs.shape[2] != LAYOUT_CONFIG_DIM or (nc is not None and configs.shape[1] != nc):
            raise invalid(f"{what}: layout configurations must be (c, {'nc' if nc is None else nc}, "
                          f"{LAYOUT_CONFIG_DIM}), got {configs.shape}")
        if configs.dtype.kind not in "iuf" and configs.size:
            raise invalid(f"{what}: layout values must be numbers, got dtype {configs.dtype}")
        if configs.size:
            values = configs.astype(np.float64)
            bad = ~np.isfinite(values) | (values != np.floor(values)) | (values < -1) | (values > 5)
            if bad.any():
                c, j, slot = (int(x) for x in np.argwhere(bad)[0])
                value = configs[c, j, slot]
                raise invalid(f"{what}: config {c}, {_node_label(j, nodes, graph)}, slot {slot} "
                              f"({GROUP_NAMES[slot // 6]} group) is {value}, expected an integer in -1..5")
        configs = np.ascontiguousarray(configs, dtype=np.int8)
    else:
        if configs.ndim != 2 or configs.shape[1] != TILE_CONFIG_DIM:
            raise invalid(f"{what}: tile configurations must be (c, {TILE_CONFIG_DIM}), got {configs.shape}")
        if not np.isfinite(np.asarray(configs, dtype=np.float64)).all():
            c, k = (int(x) for x in np.argwhere(~np.isfinite(np.asarray(configs, dtype=np.float64)))[0])
            raise invalid(f"{what}: config {c}, value {k} is not finite")
        configs = np.ascontiguousarray(configs, dtype=np.float32)
    if configs.shape[0] == 0:
        raise invalid(f"{what}: no configurations")
    return configs


def _runtimes(values, count: int, what: str, rows: str = "configurations") -> List[int]:
    """Measured runtimes in nanoseconds: `count` whole numbers > 0 (a float is taken when
    it is whole), errors naming the runtime."""
    runtimes = np.asarray(values).reshape(-1)
    if runtimes.size != count:
        raise invalid(f"{what}: {runtimes.size} runtimes for {count} {rows}")
    out = []
    for i, x in enumerate(runtimes.tolist()):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not (0 < x < 2 ** 63) or x != int(x):
            raise invalid(f"{what}: runtime {i} is {x!r}; expected a measured runtime in nanoseconds, a whole "
                          "number > 0")
        out.append(int(x))
    return out
