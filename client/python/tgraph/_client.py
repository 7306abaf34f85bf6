"""The Python client of tgraph-server: numpy in, results out.

Behaves like the C++ client library (client/client.h): graphs are sent only when the
server does not know them (it says so with the machine-readable reason
GRAPH_NOT_REGISTERED, docs/api.md), UNAVAILABLE is retried with backoff within a
retry budget long enough to ride over a server restart, every call carries the
x-graph-hash routing header, and every failure is one exception type, TgraphError,
carrying the gRPC status code."""
import contextlib
import os
import random
import threading
import time
import uuid
from typing import List, Optional, Sequence

import grpc
import numpy as np

from ._errors import TgraphError, file_error, invalid
from ._tls import tls_error
from ._graph import LAYOUT_CONFIG_DIM, TILE_CONFIG_DIM, Graph, load_graph
from .v1 import ranker_pb2, ranker_pb2_grpc
from ._results import (GROUP_NAMES, AppliedLayouts, ConfigurableNode, EntryLayout, GraphLike, HloModule, LayoutGroup,
                       MeasurementReceipt, ModelInfo, Proposals, Provenance, Ranking, Registration, TileKernel,
                       TilePriorInfo, TileProposals)
from ._rows import _Lru, _NodeNames, _check_ranking, _configs, _kind, _runtimes

ERROR_REASON_KEY = "tgraph-error-reason"      # trailing metadata (proto/error_reason.h)
GRAPH_NOT_REGISTERED = "GRAPH_NOT_REGISTERED"
ROUTING_HEADER = "x-graph-hash"               # what graph-affinity routing hashes on
REQUEST_BYTES_HEADER = "x-request-bytes"      # lets a server tell a cancel from an oversize
_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def _is_npz(path: str) -> bool:
    """Whether a file is an npz (a zip archive) by its content, not its name: anything
    else given as a graph is an HLO module (text starting with `HloModule`, or a
    serialized xla.HloProto / HloModuleProto), which the server reads."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError as e:
        raise file_error(path, e) from None


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
               exclude_runtimes_ns: Optional[np.ndarray] = None, max_changed_groups: int = 0,
               include_stored: bool = False) -> Proposals:
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
        space); include_stored: the rows the server's store holds of this graph
        (report_measurements) join exclude and their runtimes exclude_runtimes_ns, and
        when any join without start the fastest 16 measured start the search
        (stored_measurements says how many joined besides exclude). Distinct legal rows,
        the model's picks best first, deterministic for a seed."""
        graph, mark, request = self._search_request(
            graph, collection, "layout", "search() searches layouts; give a layout collection, or call search_tiles() "
            "for a tile collection", model_version=model_version, num_results=results,
            max_evaluations=max_evaluations, seed=seed, max_changed_groups=max_changed_groups)
        request.include_stored_measurements = bool(include_stored)
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
                         r.correction_measurements, r.correction_weight, r.max_changed_groups, r.num_variation,
                         np.frombuffer(r.reference_layout_configs, dtype=np.int8).reshape(
                             r.reference_configs, configs.shape[1] if r.num_configs else -1, LAYOUT_CONFIG_DIM).copy()
                         if r.reference_layout_configs else None, r.stored_measurements, r.older_stored_reports,
                         r.start_configs)

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
            except OSError as e:
                raise file_error(path, e) from None
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
