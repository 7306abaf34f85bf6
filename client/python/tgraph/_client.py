"""The Python client of tgraph-server: numpy in, results out.

Behaves like the C++ client library (client/client.h): graphs are sent only when the
server does not know them (it says so with the machine-readable reason
GRAPH_NOT_REGISTERED, docs/api.md), UNAVAILABLE is retried with backoff within a
retry budget long enough to ride over a server restart, every call carries the
x-graph-hash routing header, and every failure is one exception type, TgraphError,
carrying the gRPC status code."""
import collections
import contextlib
import hashlib
import os
import random
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Union

import grpc
import numpy as np

from ._errors import TgraphError, invalid
from ._tls import tls_error
from ._graph import LAYOUT_CONFIG_DIM, TILE_CONFIG_DIM, Graph, load_graph
from .v1 import ranker_pb2, ranker_pb2_grpc

ERROR_REASON_KEY = "tgraph-error-reason"      # trailing metadata (proto/error_reason.h)
GRAPH_NOT_REGISTERED = "GRAPH_NOT_REGISTERED"
ROUTING_HEADER = "x-graph-hash"               # what graph-affinity routing hashes on
REQUEST_BYTES_HEADER = "x-request-bytes"      # lets a server tell a cancel from an oversize
_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


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
                return cls(f.read(), path, kernel=kernel)
        except FileNotFoundError:
            raise TgraphError(grpc.StatusCode.NOT_FOUND, f"{path}: no such file") from None


GraphLike = Union[Graph, HloModule, str, os.PathLike]


def _is_npz(path: str) -> bool:
    """Whether a file is an npz (a zip archive) by its content, not its name: anything
    else given as a graph is an HLO module (text starting with `HloModule`, or a
    serialized xla.HloProto / HloModuleProto), which the server reads."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except FileNotFoundError:
        raise TgraphError(grpc.StatusCode.NOT_FOUND, f"{path}: no such file") from None


def _pem(value, what: str, label: bytes) -> Optional[bytes]:
    """PEM bytes from bytes or a path; None stays None. Errors name the argument."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        data, where = bytes(value), "the bytes given"
    else:
        where = os.fspath(value)
        try:
            with open(where, "rb") as f:
                data = f.read()
        except OSError as e:
            raise invalid(f"{what}: {where}: cannot read: {e.strerror}") from None
    begin = data.find(b"-----BEGIN ")
    while begin >= 0:
        end = data.find(b"-----", begin + 11)
        if end >= 0 and label in data[begin + 11:end]:
            return data
        begin = data.find(b"-----BEGIN ", begin + 1)
    raise invalid(f"{what}: {where} holds no PEM block '-----BEGIN ...{label.decode()}-----' (expected a PEM file)")


class Client:
    """A connection to tgraph-server.

    address: HOST:PORT. timeout: the deadline of each call (s). retry_budget: how long
    UNAVAILABLE (no server, a restart, a drain) is retried in all (s; 0 = never).

    TLS (a server started with --tls_cert/--tls_key): tls=True, with tls_ca the CA
    bundle the server's certificate must chain to (a PEM path or bytes; None: gRPC's
    default roots); for mutual TLS also tls_cert and tls_key (the client's certificate
    and key); tls_server_name when the certificate names another host than address's
    (e.g. connecting by IP). Any tls_* argument implies tls=True."""

    def __init__(self, address: str = "127.0.0.1:50051", *, timeout: float = 60.0, retry_budget: float = 30.0,
                 max_message_bytes: int = 256 << 20, tls: bool = False, tls_ca=None, tls_cert=None, tls_key=None,
                 tls_server_name: Optional[str] = None):
        options = [("grpc.max_send_message_length", max_message_bytes),
                   ("grpc.max_receive_message_length", max_message_bytes),
                   ("grpc.keepalive_time_ms", 30000), ("grpc.keepalive_timeout_ms", 10000),
                   # Reconnect within about a second of a restarted server coming back
                   # (gRPC's default backoff grows from 1 s to 120 s: a restart held calls for 10 s).
                   # Not grpc.min_reconnect_backoff_ms: gRPC takes it as the time a connection
                   # attempt may take, and 100 ms failed every connection to a server 80 ms away.
                   ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000)]
        self.timeout = timeout
        self.retry_budget = retry_budget
        self._within = threading.local()  # .until, .busy: this thread's deadline block
        self._address, self._server_name = address, tls_server_name
        self._secure = bool(tls or tls_ca is not None or tls_cert is not None or tls_key is not None or tls_server_name)
        self._has_cert = tls_cert is not None
        if tls or tls_ca is not None or tls_cert is not None or tls_key is not None or tls_server_name:
            if (tls_cert is None) != (tls_key is None):
                raise invalid("a client certificate needs both tls_cert and tls_key, or neither (no mutual TLS)")
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_pem(tls_ca, "tls_ca", b"CERTIFICATE"),
                private_key=_pem(tls_key, "tls_key", b"PRIVATE KEY"),
                certificate_chain=_pem(tls_cert, "tls_cert", b"CERTIFICATE"))
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            self._channel = grpc.secure_channel(address, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(address, options=options)
        self._stub = ranker_pb2_grpc.RankerStub(self._channel)
        self._health = self._channel.unary_unary("/grpc.health.v1.Health/Check",
                                                 request_serializer=_encode_health_request,
                                                 response_deserializer=_decode_health_response)
        # Bounded, least recently used first out: a farm's client registers module after
        # module for days (unbounded, these held millions of objects, and Python's full
        # garbage collections stalled every thread for seconds). What falls out is
        # registered again when next used.
        self._hlo = _Lru(4096)   # HloModule digest -> graph hash, learnt from RegisterGraph
        self._nodes = _Lru(64)   # graph hash -> its configurable nodes (a module's row size and names)
        self._register_calls = 0  # RegisterGraph calls made, for each call's `registrations`
        self._files = _Lru(16)   # (path, mtime, size) -> Graph

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- the RPCs ----------------------------------------------------------------
    def register(self, graph: GraphLike) -> Registration:
        """Registers a graph (idempotent) and lists its configurable nodes."""
        graph = self._graph(graph)
        request = ranker_pb2.RegisterGraphRequest()
        if isinstance(graph, HloModule):
            request.hlo_module = graph.data
            request.as_kernel = graph.kernel
            local_hash = self._hlo.get(graph.digest, "")
        else:
            graph.to_proto(request.graph)
            local_hash = graph.content_hash
        self._register_calls += 1
        try:
            r = self._call(self._stub.RegisterGraph, request, local_hash)
        except grpc.RpcError as e:
            raise _error(e, "RegisterGraph") from None
        if local_hash and r.graph_hash != local_hash:
            raise TgraphError(grpc.StatusCode.INTERNAL,
                              f"RegisterGraph: the server's hash {r.graph_hash} differs from the local one "
                              f"{local_hash} (incompatible versions?)")
        if isinstance(graph, HloModule):
            self._hlo[graph.digest] = r.graph_hash
        reg = Registration(r.graph_hash, r.num_nodes, r.pruned_nodes, r.already_registered,
                           [ConfigurableNode(c.node, c.opcode, c.instruction, c.computation,
                                             [LayoutGroup(GROUP_NAMES[g], lg.rank,
                                                          np.frombuffer(lg.candidates, dtype=np.int8).reshape(-1, 6))
                                              for g, lg in enumerate(c.groups)])
                            for c in r.configurable_nodes], list(r.warnings))
        self._nodes[r.graph_hash] = _NodeNames(reg.configurable_nodes)
        return reg

    def rank(self, collection: str, graph: GraphLike, configs: Optional[np.ndarray] = None, *, top_k: int = 0,
             model_version: int = 0, folds: Sequence[int] = (), cascade: bool = False,
             reference: Optional[np.ndarray] = None) -> Ranking:
        """Ranks configurations of `graph` by predicted runtime.

        collection: e.g. "layout:xla:random" or "tile:xla". configs: (c, nc, 18) layout
        values -1..5 for a layout collection, (c, 24) floats for tile; default: the npz
        file's own. top_k > 0 returns the fastest top_k in `order` (cascade: rescore only
        the likely top with every fold). model_version 0 is the latest. reference: rows
        in the configs' encoding to score against; calls with the same reference get
        comparable scores (default: the server chooses it from `configs`)."""
        graph = self._graph(graph)
        mark = self._register_calls
        kind = _kind(collection)
        configs = self._rows(graph, configs, kind, "configs")
        request = ranker_pb2.RankConfigsRequest(collection=collection, model_version=model_version,
                                                num_configs=configs.shape[0], top_k=top_k,
                                                folds=list(folds), cascade=cascade)
        if kind == "layout":
            request.layout_configs = configs.tobytes()
        else:
            request.tile_configs = configs.astype("<f4").tobytes()
        if reference is not None:
            reference = self._rows(graph, reference, kind, "reference")
            request.num_reference_configs = reference.shape[0]
            if kind == "layout":
                request.reference_layout_configs = reference.tobytes()
            else:
                request.reference_tile_configs = reference.astype("<f4").tobytes()
        r = self._with_registration(self._stub.RankConfigs, request, graph, "RankConfigs")
        _check_ranking(r, request.num_configs, top_k)
        registrations = self._register_calls - mark
        t = r.timing
        timing = {"queue_ms": t.queue_ms, "graph_prepare_ms": t.graph_prepare_ms, "inference_ms": t.inference_ms,
                  "total_ms": t.total_ms, "cache_hit": t.cache_hit, "batches": t.batches, "rescored": t.rescored}
        return Ranking(np.array(r.scores, np.float32), np.array(r.spread, np.float32),
                       np.array(r.ranking, np.int32), r.model_version, timing, registrations, r.reference_configs)

    def report_measurements(self, collection: str, graph: GraphLike, configs, runtimes_ns: Sequence[int],
                            source: str = "", *, kernel: Optional[TileKernel] = None) -> MeasurementReceipt:
        """Stores measured runtimes (ns, each > 0) in the server's measurement store, for
        fine-tuning and, for a tile kernel, for the prior of its next searches. A layout
        collection: configs are layout rows (c, nc, 18). A tile collection: configs are
        the measured configurations by name ("128x128x64 w4 s3", as search_tiles names
        them), graph the kernel (a tile npz or HloModule(..., kernel=True)) and kernel the
        TileKernel measured (required). Returning means stored durably, once: the report
        carries an id its retries reuse, so a retry after a lost answer is not stored
        again (already_stored in the receipt)."""
        graph = self._graph(graph)
        mark = self._register_calls
        kind = _kind(collection)
        # One id per report, the same on every retry: the server stores it once.
        request = ranker_pb2.ReportMeasurementsRequest(collection=collection, source=source,
                                                       report_id=uuid.uuid4().hex)
        if kind == "tile":
            if not isinstance(kernel, TileKernel):
                raise invalid("kernel: a tile report names the kernel measured: kernel=tgraph.TileKernel(name, "
                              "source_hash)")
            names = [configs] if isinstance(configs, str) else list(configs)
            if not names or not all(isinstance(n, str) for n in names):
                raise invalid("configs: a tile report's configurations are names, e.g. ['128x128x64 w4 s3']")
            request.num_configs = len(names)
            request.tile_names.extend(names)
            kernel._into(request.kernel)
        else:
            if kernel is not None:
                raise invalid("kernel: for tile collections; this is a layout collection")
            rows = self._rows(graph, configs, "layout", "configs")
            request.num_configs = rows.shape[0]
            request.layout_configs = rows.tobytes()
        request.runtimes_ns.extend(_runtimes(runtimes_ns, request.num_configs, "runtimes_ns"))
        r = self._with_registration(self._stub.ReportMeasurements, request, graph, "ReportMeasurements")
        return MeasurementReceipt(r.stored, r.shard, self._register_calls - mark, r.already_stored)

    def search(self, collection: str, graph: GraphLike, *, results: int = 0, max_evaluations: int = 0,
               exclude: Optional[np.ndarray] = None, start: Optional[np.ndarray] = None, seed: int = 0,
               model_version: int = 0, candidates: Optional[np.ndarray] = None,
               exclude_runtimes_ns: Optional[np.ndarray] = None, max_changed_groups: int = 0) -> Proposals:
        """Proposes layout configurations to measure next: a model-guided search of the
        graph's layout space on the server (docs/api.md, "Searching"). exclude: (c, nc,
        18) rows never to return (what was measured); start: rows to start from (measured
        good ones); candidates: when given, the only rows it may score and return (e.g. a
        file's measured pool); exclude_runtimes_ns: the exclude rows' measured runtimes, in
        order (with 4 or more, the search also follows what they say about this graph;
        give the rows in the order measured: when the last 30 stopped improving, the last
        num_variation proposals are random variation of the fastest measured);
        max_changed_groups: the most layout groups a proposal may change from the nearest
        of the default and the start rows (0: the server's default, 8; -1: the whole
        space). Distinct legal rows, the model's picks best first, deterministic for a
        seed."""
        graph, mark, request = self._search_request(
            graph, collection, "layout", "search() searches layouts; give a layout collection, or call search_tiles() "
            "for a tile collection", model_version=model_version, num_results=results,
            max_evaluations=max_evaluations, seed=seed, max_changed_groups=max_changed_groups)
        for count, field, rows in (("num_exclude", "exclude_layout_configs", exclude),
                                   ("num_start", "start_layout_configs", start),
                                   ("num_candidates", "candidate_layout_configs", candidates)):
            if rows is not None and len(rows):
                rows = self._rows(graph, rows, "layout", field.replace("_layout_configs", ""))
                setattr(request, count, rows.shape[0])
                setattr(request, field, rows.tobytes())
        if exclude_runtimes_ns is not None and len(exclude_runtimes_ns):
            request.exclude_runtimes_ns.extend(
                _runtimes(exclude_runtimes_ns, request.num_exclude, "exclude_runtimes_ns", "excluded rows"))
        r = self._with_registration(self._stub.SearchConfigs, request, graph, "SearchConfigs")
        registrations = self._register_calls - mark
        configs = np.frombuffer(r.layout_configs, dtype=np.int8)
        configs = configs.reshape(r.num_configs, -1, LAYOUT_CONFIG_DIM) if r.num_configs else configs.reshape(0, 0, 18)
        return Proposals(configs.copy(), np.array(r.scores, dtype=np.float32), np.array(r.spread, dtype=np.float32),
                         r.model_version, r.evaluations, r.generations, r.reference_configs,
                         {"total_ms": r.timing.total_ms, "inference_ms": r.timing.inference_ms}, registrations,
                         r.correction_measurements, r.correction_weight, r.max_changed_groups, r.num_variation)

    def search_tiles(self, collection: str, graph: GraphLike, *, results: int = 0,
                     exclude: Optional[np.ndarray] = None, exclude_runtimes_ns: Optional[np.ndarray] = None,
                     model_version: int = 0, kernel: Optional[TileKernel] = None) -> TileProposals:
        """Proposes a GPU kernel's tile configurations to measure next (docs/api.md, "A GPU
        kernel's tile configurations"): the model scores every legal configuration of the
        graph's problem (one matrix product: a tile npz or Graph, or an
        HloModule(..., kernel=True); a module without kernel=True is a layout graph, which a
        tile search refuses with INVALID_ARGUMENT) that is not in exclude ((c, 24) rows,
        what was measured) and returns the best `results` (0: 10). exclude_runtimes_ns:
        the exclude rows' measured runtimes; with two or more the model's prior follows
        them, so a farm's loop sends every measured row and its runtime each round.
        kernel: the TileKernel searched for; the store's measurements of it on other
        problems (report_measurements) join the prior's measured problems
        (kernel_problems says how many), and its timings of this very problem come back
        in `measured` (tile name -> median ns)."""
        graph, mark, request = self._search_request(
            graph, collection, "tile", "search_tiles searches a kernel's tile configurations; give a tile collection "
            "with a tile space (e.g. tile@h100-triton)", model_version=model_version, num_results=results)
        if kernel is not None:
            if not isinstance(kernel, TileKernel):
                raise invalid(f"kernel: a tgraph.TileKernel(name, source_hash), got {type(kernel).__name__}")
            kernel._into(request.kernel)
        if exclude is not None and len(exclude):
            rows = self._rows(graph, exclude, "tile", "exclude")
            request.num_exclude = rows.shape[0]
            request.exclude_tile_configs = rows.astype("<f4").tobytes()
        if exclude_runtimes_ns is not None and len(exclude_runtimes_ns):
            request.exclude_runtimes_ns.extend(
                _runtimes(exclude_runtimes_ns, request.num_exclude, "exclude_runtimes_ns", "excluded rows"))
        r = self._with_registration(self._stub.SearchConfigs, request, graph, "SearchConfigs")
        rows = np.frombuffer(r.tile_configs, dtype="<f4").reshape(-1, TILE_CONFIG_DIM)
        return TileProposals(list(r.tile_names), rows.astype(np.float32), np.array(r.scores, dtype=np.float32),
                             np.array(r.spread, dtype=np.float32), r.model_version, r.evaluations,
                             {"total_ms": r.timing.total_ms, "inference_ms": r.timing.inference_ms},
                             self._register_calls - mark, r.correction_measurements, r.kernel_problems,
                             dict(zip(r.measured_tile_names, (int(x) for x in r.measured_runtimes_ns))))

    def apply(self, module, row) -> AppliedLayouts:
        """Writes one layout row, (nc, 18) in registration order (or (1, nc, 18)), into an
        HLO module's text, every other byte kept, as tgraph-featurize apply does; says
        which of its choices a stock XLA takes as written (entry_layouts, in the form
        jax.jit takes them) and which need a compiler hook. module: an HloModule or a
        path holding HLO text (a proto has no text to keep: dump the module as text)."""
        module = self._graph(module)
        if not isinstance(module, HloModule):
            raise invalid("module: apply writes layouts into an HLO module's text; give a tgraph.HloModule or the "
                          "path of its text dump")
        rows = np.asarray(row)
        if rows.ndim == 2:
            rows = rows[None]
        if rows.ndim != 3 or rows.shape[0] != 1:
            raise invalid(f"row: one layout row, (nc, {LAYOUT_CONFIG_DIM}) or (1, nc, {LAYOUT_CONFIG_DIM}), "
                          f"got {np.asarray(row).shape}")
        rows = self._rows(module, rows, "layout", "row")
        request = ranker_pb2.ApplyLayoutsRequest(hlo_text=module.data, layout_config=rows.tobytes())
        try:
            r = self._call(self._stub.ApplyLayouts, request, "")
        except grpc.RpcError as e:
            raise _error(e, "ApplyLayouts") from None
        return AppliedLayouts(r.hlo_text.decode("utf-8", errors="replace"), r.layouts_written, r.copies,
                              list(r.changes),
                              [EntryLayout(e.result, e.index, e.name, e.shape, list(e.minor_to_major), e.asked_by, e.jax)
                               for e in r.entry_layouts], list(r.needs_hook))

    def models(self) -> List[ModelInfo]:
        """The loaded models: per collection, the latest version first."""
        try:
            r = self._call(self._stub.ListModels, ranker_pb2.ListModelsRequest(), "")
        except grpc.RpcError as e:
            raise _error(e, "ListModels") from None
        return [ModelInfo(m.collection, m.version, list(m.loaded_versions), m.architecture, m.hidden, m.folds,
                          m.mean_valid_score, m.created, m.batch_size, m.reference_configs,
                          Provenance(m.provenance.data, m.provenance.dataset, m.provenance.data_fingerprint,
                                     m.provenance.graphs, m.provenance.configurations, m.provenance.finetunes,
                                     m.provenance.finetune_graphs, m.provenance.finetune_measurements,
                                     m.provenance.synthetic_only, m.provenance.summary),
                          m.tile_space,
                          TilePriorInfo(m.tile_prior.weight, m.tile_prior.network_share, m.tile_prior.problems)
                          if m.HasField("tile_prior") else None)
                for m in r.models]

    def health(self, service: str = "tgraph.v1.Ranker") -> str:
        """SERVING, NOT_SERVING, ... of grpc.health.v1: "tgraph.v1.Ranker" is readiness,
        "liveness" liveness."""
        try:
            return self._call(self._health, service, "")
        except grpc.RpcError as e:
            raise _error(e, "Health") from None

    # --- plumbing ----------------------------------------------------------------
    def _search_request(self, graph, collection: str, kind: str, wrong_kind: str, **fields):
        """The graph, the registrations count before the call, and a SearchConfigsRequest
        for a collection of `kind` (INVALID_ARGUMENT saying `wrong_kind` otherwise)."""
        graph = self._graph(graph)
        if _kind(collection) != kind:
            raise invalid(f"collection: {wrong_kind}, got '{collection}'")
        return graph, self._register_calls, ranker_pb2.SearchConfigsRequest(collection=collection, **fields)

    def _graph(self, graph: GraphLike):
        if isinstance(graph, (Graph, HloModule)):
            return graph
        if isinstance(graph, (str, os.PathLike)):
            path = os.path.abspath(os.fspath(graph))
            try:
                st = os.stat(path)
            except FileNotFoundError:
                raise TgraphError(grpc.StatusCode.NOT_FOUND, f"{path}: no such file") from None
            key = (path, st.st_mtime_ns, st.st_size)
            if key not in self._files:
                if _is_npz(path):
                    self._files[key] = load_graph(path)
                else:  # HLO text or an HLO proto: the server tells them apart and featurizes
                    self._files[key] = HloModule.from_file(path)
            return self._files[key]
        raise invalid(f"graph: expected a tgraph.Graph, an HloModule or a path (npz, HLO text or HLO proto), "
                      f"got {type(graph).__name__}")

    def _rows(self, graph, rows, kind: str, what: str) -> np.ndarray:
        """Configuration rows as the wire wants them, checked as the server checks them,
        errors naming the row, the configurable node (its instruction, for a module) and
        the slot. A module is registered first (once), for its row size and names."""
        nodes = None
        if kind == "layout" and isinstance(graph, HloModule):
            if graph.digest not in self._hlo or self._hlo[graph.digest] not in self._nodes:
                self.register(graph)
            nodes = self._nodes[self._hlo[graph.digest]]
        return _configs(graph, rows, kind, what, nodes)

    @contextlib.contextmanager
    def deadline(self, seconds: float, *, retry_busy: bool = False):
        """Every call this thread makes inside the block ends, retries included, within
        `seconds` from now: each call may take whatever is left (its own timeout is not
        applied), so a caller with one budget for several calls spends it on the call that
        needs it (a first connection to a far server, a busy one). retry_busy:
        RESOURCE_EXHAUSTED (a full queue) is retried with backoff, as UNAVAILABLE is."""
        outer = getattr(self._within, "until", None), getattr(self._within, "busy", False)
        until = time.monotonic() + seconds
        self._within.until = until if outer[0] is None else min(until, outer[0])
        self._within.busy = retry_busy or outer[1]
        try:
            yield self
        finally:
            self._within.until, self._within.busy = outer

    def _call(self, method, request, graph_hash: str):
        """One RPC; UNAVAILABLE retried within the budget (or the deadline block's end):
        once the channel is connected again, after a backoff of 0.1 s doubling to 2 s;
        inside a deadline block with retry_busy, RESOURCE_EXHAUSTED after a jittered
        backoff from 20 ms doubling to 0.5 s."""
        size = len(_encode_health_request(request)) if isinstance(request, str) else request.ByteSize()
        metadata = ((REQUEST_BYTES_HEADER, str(size)),)
        if graph_hash:
            metadata += ((ROUTING_HEADER, graph_hash),)
        until = getattr(self._within, "until", None)
        busy_retried = getattr(self._within, "busy", False)
        give_up = until if until is not None else time.monotonic() + self.retry_budget
        backoff, busy_backoff = 0.1, 0.02
        probed = False
        while True:
            timeout = self.timeout if until is None else max(until - time.monotonic(), 0.001)
            try:
                return method(request, timeout=timeout, metadata=metadata)
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNAVAILABLE and not probed:
                    # A TLS mismatch is not a network fault: said as such, never retried.
                    probed = True
                    tls = tls_error(e, self._address, self._secure, self._has_cert, self._server_name)
                    if tls is not None:
                        raise tls from None
                if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and busy_retried:
                    # A full queue empties in a fraction of a second; many clients told at
                    # once come back spread out rather than together.
                    pause = busy_backoff * random.uniform(0.5, 1.0)
                    if time.monotonic() + pause + 0.005 > give_up:
                        raise
                    time.sleep(pause)
                    busy_backoff = min(2 * busy_backoff, 0.5)
                    continue
                if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() + backoff > give_up:
                    raise
                # A restarting server: wait for the connection to come back (at once when
                # it is up) rather than sleeping through backoff steps past its return.
                try:
                    grpc.channel_ready_future(self._channel).result(timeout=max(0.0, give_up - time.monotonic()))
                except grpc.FutureTimeoutError:
                    raise e from None
                # Connected but answered UNAVAILABLE (a proxy without a healthy backend).
                time.sleep(backoff)
                backoff = min(2 * backoff, 2.0)

    def _with_registration(self, method, request, graph, what):
        """The call by hash; registers the graph when the server does not know it (new,
        evicted, restarted, another replica) and tries once more. The caller counts the
        registrations (_register_calls)."""
        if isinstance(graph, HloModule) and graph.digest not in self._hlo:
            self.register(graph)
        request.graph_hash = self._hlo[graph.digest] if isinstance(graph, HloModule) else graph.content_hash
        for attempt in range(2):
            try:
                return self._call(method, request, request.graph_hash)
            except grpc.RpcError as e:
                if attempt == 0 and _not_registered(e):
                    self.register(graph)
                    continue
                raise _error(e, what) from None
        raise AssertionError("unreachable")


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


def _not_registered(e: grpc.RpcError) -> bool:
    if e.code() != grpc.StatusCode.NOT_FOUND:
        return False
    return any(k == ERROR_REASON_KEY and v == GRAPH_NOT_REGISTERED for k, v in (e.trailing_metadata() or ()))


def _error(e: grpc.RpcError, what: str) -> TgraphError:
    return TgraphError(e.code(), f"{what}: {e.details()}")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _encode_health_request(service: str) -> bytes:
    """grpc.health.v1.HealthCheckRequest {string service = 1}."""
    data = service.encode()
    return b"\x0a" + _varint(len(data)) + data if data else b""


def _decode_health_response(data: bytes) -> str:
    """grpc.health.v1.HealthCheckResponse {ServingStatus status = 1}: a varint field."""
    status, i = 0, 0
    while i < len(data):
        tag = data[i]
        i += 1
        value, shift = 0, 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if tag == 0x08:
            status = value
        elif tag & 7 != 0:  # the response has only this varint field
            raise ValueError(f"grpc.health.v1.HealthCheckResponse: unexpected field tag {tag}")
    return _HEALTH_STATUS.get(status, str(status))
