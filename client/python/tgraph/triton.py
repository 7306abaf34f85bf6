"""tgraph inside Triton's autotuner: measure the model's best few candidates, not every one.

    import tgraph.triton

    @triton.autotune(configs=CONFIGS, key=["M", "N", "K"],
                     prune_configs_by=tgraph.triton.prune_configs_by("tile@h100-triton", top_k=3))
    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, ...,
                      BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr): ...

or, for every autotuned kernel of the process without editing a decorator,
`tgraph.triton.install("tile@h100-triton")`.

With top_k="auto" Triton gets the model's best max_k candidates (default 20) in the
model's order, and measures until sure: before each benchmark the stop rule
(tgraph._stop_rule.StopRule) calibrates the model's scores to the times measured so far
and asks how many of the candidates not measured yet could still beat the fastest
measured; once that expected count is below its epsilon the rest are skipped, never
compiled or launched (their timing is inf), and Triton picks among the measured.

What it does. Triton calls the prune function once per new key with every candidate; it
asks tgraph-server for the model's order of the key's matrix product (one search, with
the kernel's registration the first time its problem is seen) and returns the `top_k`
best of the user's own Config objects, plus every candidate the model cannot judge:
values outside the model's tile space (another BLOCK_K, more stages, num_ctas > 1) are
kept and measured. When anything goes wrong (no model for the dtype or kernel variant,
a kernel whose configurations or arguments are not a matrix product's, a server that does
not answer within `deadline`), every candidate is returned, as Triton alone would measure
them, with one warning per kernel and reason.

What Triton then measures is reported back (knobs.autotuning.listener, chained after any
listener already set) from a background thread, so that the next key of the same kernel
starts from it and `tgraph-train finetune` can learn from it. A measurement names its
kernel (the function's name and a hash of its code, not of its comments or docstrings):
two kernels never share them.

Nothing here imports torch; Triton is imported when a prune function is first used.
"""
import atexit
import collections
import hashlib
import io
import json
import operator
import queue
import re
import sys
import threading
import textwrap
import time
import tokenize
import warnings
from typing import Callable, Dict, List, Optional, Union

import grpc

from ._client import Client, TileKernel
from ._gpu import running_gpu, same_gpu
from ._gemm import DTYPES, HLO_TYPES, Problem, Tile, gemm_module, parse_tile  # noqa: F401 (the API)
from ._shortlist import Shortlist, ShortlistError, write_shortlist  # noqa: F401 (the API)
from ._errors import TgraphError
from ._stop_rule import StopRule
from ._until_sure import begin as _begin_auto, end as _end_auto

# What a configuration's block sizes are called in kernels people write; `names` adds or
# replaces (e.g. {"block_m": "BM", "block_n": "BN", "block_k": "BK"}).
DEFAULT_NAMES = {
    "block_m": ("BLOCK_SIZE_M", "BLOCK_M", "BM", "TILE_M", "TILE_SIZE_M"),
    "block_n": ("BLOCK_SIZE_N", "BLOCK_N", "BN", "TILE_N", "TILE_SIZE_N"),
    "block_k": ("BLOCK_SIZE_K", "BLOCK_K", "BK", "TILE_K", "TILE_SIZE_K"),
}
DEFAULT_DEADLINE = 2.0  # seconds a prune may wait for the server, in all
RETRY_FIRST = 2.0       # seconds a server that did not answer is left alone, the first time ...
RETRY_AFTER = 30.0      # ... doubling while it stays silent, up to this
TIMEOUTS_BEFORE_DOWN = 3  # prunes in a row that time out on a connected server before it is left alone


class Skip(Exception):
    """Why a kernel's candidates are all measured: said once per kernel and kind of
    reason ("server": it did not answer; "refused": it answered with an error;
    "kernel": the kernel or its arguments are not a matrix product's)."""

    def __init__(self, message: str, kind: str = "kernel"):
        super().__init__(message)
        self.kind = kind


def kernel_of(fn) -> Optional[TileKernel]:
    """The TileKernel of a @triton.jit function (or an object wrapping one in `.fn`): its
    name and the first 16 hex digits of the SHA-256 of its code's tokens (code_digest):
    comments, docstrings and blank lines leave it, any token of code changes it."""
    seen = 0
    while fn is not None and not hasattr(fn, "src") and seen < 8:
        fn, seen = getattr(fn, "fn", None), seen + 1
    if fn is None:
        return None
    name = re.sub(r"[^A-Za-z0-9_.:-]", "_", getattr(fn, "__name__", "") or "kernel")[:128]
    src = getattr(fn, "src", "") or ""
    return TileKernel(name, code_digest(src)[:16] if src else "")


def code_digest(src: str) -> str:
    """SHA-256 (hex) of a Python source's code: its tokens with their kinds, without
    comments, blank lines and statements that are a string alone (docstrings: they do
    nothing). Source that does not tokenize is hashed whole."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(textwrap.dedent(src)).readline)
                  if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING)]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return hashlib.sha256(src.encode()).hexdigest()
    kept, skip_newline = [], False
    for i, t in enumerate(tokens):
        starts_line = not kept or kept[-1][0] in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
        alone = i + 1 < len(tokens) and tokens[i + 1].type == tokenize.NEWLINE
        if t.type == tokenize.STRING and starts_line and alone:
            skip_newline = True
            continue
        if skip_newline and t.type == tokenize.NEWLINE:
            skip_newline = False
            continue
        kept.append((t.type, t.string))
    return hashlib.sha256("\n".join(f"{kind}:{text}" for kind, text in kept).encode()).hexdigest()


def _calling_autotuner():
    """The Autotuner whose prune_configs called the prune function (Triton passes it
    nothing of itself): found on the stack, None when not."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return None
    frame = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            return None
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Autotuner):
            return candidate
        frame = frame.f_back
    return None


def _size(value) -> Optional[int]:
    """An integer argument as an int (Python's, numpy's, a 0-d tensor's), else None."""
    if value is None or isinstance(value, bool) or _shape(value):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _shape(value) -> Optional[tuple]:
    """A tensor argument's shape (what has a dtype and a shape), else None."""
    if not hasattr(value, "dtype") or not hasattr(value, "shape"):
        return None
    try:
        return tuple(int(d) for d in value.shape)
    except (TypeError, ValueError):
        return None


_HINT = ("if it is not a matrix product there is nothing to do; if it is one whose arguments say it "
         "differently, give problem={'m': NAME, 'n': NAME, 'k': NAME, 'a': NAME} or problem=callable")


def _proven_sizes(tensors: Dict[str, object], sizes: Dict[str, Optional[int]]):
    """(M, N, K) when the tensor arguments are two matrices A (M x K) and B (K x N) (and
    any others matrices too) agreeing with the integer arguments M, N, K the kernel has;
    Skip naming what does not fit otherwise."""
    shapes = {name: _shape(t) for name, t in tensors.items()}
    other = {name: shape for name, shape in shapes.items() if len(shape) != 2}
    if other:
        said = ", ".join(f"{name} {'x'.join(map(str, shape)) or 'a scalar'}" for name, shape in list(other.items())[:3])
        raise Skip(f"its tensor arguments are not all matrices ({said}): not a 2-D matrix product; {_HINT}")
    mats = list(shapes.values())
    if len(mats) < 2:
        raise Skip(f"it has {len(mats)} 2-D tensor argument(s), not the operands A (M x K) and B (K x N); {_HINT}")
    (m, k), (k2, n) = mats[0], mats[1]
    if k != k2:
        raise Skip(f"its first two 2-D tensors are {m}x{k} and {k2}x{n}: not A (M x K) and B (K x N); {_HINT}")
    given = tuple(sizes[r] for r in ("m", "n", "k"))
    if any(v is not None for v in given) and given != (m, n, k):
        said = ", ".join(f"{r.upper()}={v}" for r, v in zip("mnk", given) if v is not None)
        raise Skip(f"its arguments {said} disagree with its tensors A {m}x{k} and B {k2}x{n}; {_HINT}")
    return m, n, k


def _dtype_of(value) -> Optional[str]:
    dt = getattr(value, "dtype", None)
    return None if dt is None else DTYPES.get(str(dt), str(dt))


class Pruner:
    """The prune function (prune_configs_by's early_config_prune): see the module's text.

    collection: the tile model to ask (e.g. "tile@h100-triton"). address: tgraph-server's
    HOST:PORT. top_k: the distinct tile configurations measured (every candidate of each,
    and every candidate the model cannot judge), or "auto": measured in the model's order
    until the stop rule is sure, at most max_k (stop_rule: a StopRule of one's own).
    deadline: seconds a prune waits for the server in all, its calls and their retries
    (a full queue, a lost connection) together; past it, every candidate is measured. names:
    what the kernel calls BLOCK_M/N/K ({"block_m": "BM", ...}), beside DEFAULT_NAMES.
    problem: the matrix product from the kernel's arguments: a callable(named_args) ->
    (M, N, K, dtype), or a dict naming the arguments ({"m": "M", "n": "N", "k": "K",
    "a": "a_ptr"}); default: integer arguments M, N and K, else the shapes of the first
    two 2-D tensor arguments (A: M x K, B: K x N), and the dtype of the first tensor.
    report: send what Triton measured to the server (default: True, False with a
    shortlist); source: a label stored with it (e.g. the GPU). client: a tgraph.Client to
    use instead of address. shortlist: a file of write_shortlist's: the orders come from
    it and no server is asked (a shape not in it: every candidate measured, one warning).
    confirm: measure again what the store already holds; by default a problem whose every
    candidate the store has timed (for this kernel) gets the measured fastest alone, which
    Triton runs without benchmarking. gpu: the GPU the kernels run on, as the CUDA runtime
    names it; default: the current CUDA device when PyTorch sees one. Reports and searches
    name it: a collection holds one GPU's timings, so on another GPU than the model's the
    model's order still prunes (one warning) and nothing is reported."""

    def __init__(self, collection: Optional[str] = None, *, shortlist: Optional[str] = None,
                 address: str = "127.0.0.1:50051", top_k: Union[int, str] = 3,
                 max_k: int = 20, stop_rule: Optional[StopRule] = None,
                 deadline: float = DEFAULT_DEADLINE, names: Optional[Dict[str, str]] = None,
                 problem: Union[None, Callable, Dict[str, str]] = None, report: Optional[bool] = None, source: str = "",
                 client: Optional[Client] = None, confirm: bool = False, gpu: Optional[str] = None):
        if top_k != "auto" and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1):
            raise ValueError(f"top_k: a count of configurations >= 1, or \"auto\", got {top_k!r}")
        if not isinstance(max_k, int) or isinstance(max_k, bool) or max_k < 1:
            raise ValueError(f"max_k: a count of configurations >= 1, got {max_k!r}")
        if stop_rule is not None and not isinstance(stop_rule, StopRule):
            raise ValueError(f"stop_rule: a tgraph.triton.StopRule, got {type(stop_rule).__name__}")
        self.max_k = max_k
        self.stop_rule = stop_rule or StopRule()
        if not deadline > 0:
            raise ValueError(f"deadline: seconds > 0, got {deadline!r}")
        unknown = set(names or {}) - set(DEFAULT_NAMES)
        if unknown:
            raise ValueError(f"names: keys are {sorted(DEFAULT_NAMES)}, got {sorted(unknown)}")
        if isinstance(problem, dict) and set(problem) - {"m", "n", "k", "a", "b", "dtype"}:
            raise ValueError(f"problem: keys are m, n, k, a, b, dtype, got {sorted(problem)}")
        self._shortlist = Shortlist(shortlist) if shortlist else None
        if self._shortlist is not None:
            if collection and collection != self._shortlist.collection:
                raise ValueError(f"collection {collection!r}: the shortlist {shortlist} is of "
                                 f"{self._shortlist.collection!r}")
            collection = self._shortlist.collection
        elif not collection:
            raise ValueError("collection: the tile model to ask (e.g. \"tile@h100-triton\"), or shortlist=FILE")
        if gpu is not None and not isinstance(gpu, str):
            raise ValueError(f"gpu: the GPU's name (\"NVIDIA H100 80GB HBM3\"), got {gpu!r}")
        self._gpu = (gpu, "") if gpu is not None else None  # None: the running device, asked at the first prune
        self.other_gpu = False  # the kernels run on another GPU than the collection's: nothing is reported
        report = self._shortlist is None if report is None else report
        self.confirm = bool(confirm)
        self.collection, self.top_k, self.deadline = collection, top_k, float(deadline)
        self.names = {role: ((names or {})[role],) + DEFAULT_NAMES[role] if role in (names or {}) else DEFAULT_NAMES[role]
                      for role in DEFAULT_NAMES}
        self.problem, self.report, self.source = problem, report, source
        self._client = client or Client(address, timeout=self.deadline, retry_budget=0)
        self._lock = threading.Lock()
        self._orders = collections.OrderedDict()  # (kernel key, problem) -> model order (tile names); bounded
        self._warned = set()
        self._down_until = 0.0  # monotonic time before which the server is not asked (it did not answer)
        self._timeouts = 0  # prunes in a row whose server call ran out of time
        self._left_alone = RETRY_FIRST  # how long the next time the server is left alone
        self.stats = collections.Counter()  # prunes, searches, fallbacks, kept, reported, ...
        self.last = None  # the last prune's record (what it asked, kept and why): for tests and logs

    # --- Triton's interface ------------------------------------------------------
    def __call__(self, configs, named_args, **kwargs):
        autotuner = _calling_autotuner()
        return self.prune(configs, named_args, kwargs, kernel=kernel_of(autotuner.fn) if autotuner else None,
                          autotuner=autotuner)

    def prune(self, configs, named_args, kwargs, kernel: Optional[TileKernel] = None, autotuner=None) -> list:
        """The candidates to measure, the user's own objects: the model's top_k and every
        one it cannot judge; all of them, with a warning, when it cannot answer.
        autotuner: the Triton Autotuner that will benchmark them (top_k="auto" follows its
        benchmarks only; without it every kept candidate is measured)."""
        _end_auto()  # a tuning's stop rule never outlives it
        configs = list(configs)
        self.stats["prunes"] += 1
        label = kernel.name if kernel else "an autotuned kernel"
        name, capability = self._gpu or running_gpu()
        if kernel is not None and name:
            kernel = TileKernel(kernel.name, kernel.source_hash, name, capability)
        record = {"kernel": kernel, "problem": None, "tiles": {}, "kept": configs, "order": [], "why": ""}
        self.last = record
        if len(configs) <= 1:
            return configs
        try:
            tiles = {id(c): self._tile(c, named_args, kwargs) for c in configs}
            problem = self._problem(named_args, kwargs)
            record["problem"], record["tiles"] = problem, tiles
            # One budget for the calls a prune makes (the space once, the search, a
            # registration): a far or busy server gets the whole deadline where it needs it.
            with self._client.deadline(self.deadline, retry_busy=True):
                axes, collection_gpu = self._axes()
                self._check_gpu(label, name, collection_gpu)
                order = self._order(problem, kernel)
        except Skip as why:
            record["why"] = str(why)
            self._fallback(label, str(why), why.kind)
            _pending(self, record, configs)
            return configs
        order, scores, measured = order
        record["order"] = order
        rank = {name: i for i, name in enumerate(order)}
        inside = lambda t: t is not None and _inside(t, axes)  # noqa: E731
        judged = [c for c in configs if tiles[id(c)] is not None and tiles[id(c)].name in rank]
        # Outside the space: the model cannot judge it, so it is measured. Inside it but not
        # ranked: the compiler refused it for this kernel variant where the model's
        # measurements were taken, so it is not.
        unjudged = [c for c in configs if not inside(tiles[id(c)])]
        record["refused"] = [c for c in configs if inside(tiles[id(c)]) and tiles[id(c)].name not in rank]
        stored = self._stored_fastest(judged, tiles, measured)
        if stored is not None:
            record["kept"] = kept = [stored] + unjudged
            record["why"] = "every candidate's timing is stored: the measured fastest"
            self.stats["measured_once"] += 1
            self.stats["kept"] += len(kept)
            self.stats["skipped"] += len(configs) - len(kept)
            return kept
        auto = self.top_k == "auto"
        best = sorted({tiles[id(c)].name for c in judged}, key=rank.get)[:self.max_k if auto else self.top_k]
        kept = sorted((c for c in judged if tiles[id(c)].name in best), key=lambda c: rank[tiles[id(c)].name])
        kept += unjudged
        record["kept"] = kept
        if auto and autotuner is not None:
            outside = {id(c) for c in unjudged}
            _begin_auto(self, record, {id(c): tiles[id(c)].name for c in kept if id(c) not in outside},
                        dict(zip(order, scores)), autotuner)
        self.stats["kept"] += len(kept)
        self.stats["skipped"] += len(configs) - len(kept)
        _pending(self, record, kept)
        return kept

    def _stored_fastest(self, judged, tiles, measured):
        """The candidate the store timed fastest when it timed every one the model judges
        (this kernel, this problem), unless the user asked to confirm; else None."""
        if self.confirm or not measured or not judged:
            return None
        if any(tiles[id(c)].name not in measured for c in judged):
            return None
        return min(judged, key=lambda c: measured[tiles[id(c)].name])

    # --- the parts ----------------------------------------------------------------
    def _problem(self, named_args, kwargs) -> Problem:
        """The matrix product the arguments prove: the user's problem= as given, else two 2-D
        operands A (M x K) and B (K x N), agreeing with integer arguments M, N, K where the
        kernel has them; anything else (3-D operands, disagreeing sizes) is not pruned."""
        args = {**named_args, **kwargs}
        if callable(self.problem):
            try:
                m, n, k, dtype = self.problem(args)
            except Exception as e:
                raise Skip(f"the problem function raised {type(e).__name__}: {e}") from None
            return self._checked(_size(m), _size(n), _size(k), DTYPES.get(str(dtype), str(dtype)))
        spec = self.problem or {}
        tensors = {name: v for name, v in named_args.items() if _shape(v)}  # scalars (numpy's, 0-d) are sizes
        a = args.get(spec["a"]) if "a" in spec else next(iter(tensors.values()), None)
        if "a" in spec and a is None:
            raise Skip(f"problem: no argument '{spec['a']}'")
        dtype = DTYPES.get(str(args[spec["dtype"]]), str(args[spec["dtype"]])) if "dtype" in spec else _dtype_of(a)
        if dtype is None:
            raise Skip("no tensor argument says the dtype: if it is not a matrix product there is nothing to do; if "
                       "it is, give problem={'a': NAME} or problem=callable")
        sizes = {role: _size(args.get(spec.get(role, default))) for role, default in (("m", "M"), ("n", "N"), ("k", "K"))}
        if {"m", "n", "k"} & set(spec):  # the user's own mapping: as given
            missing = [r.upper() for r in ("m", "n", "k") if sizes[r] is None]
            if missing:
                raise Skip(f"problem: the arguments it names for {', '.join(missing)} are not integers")
            return self._checked(sizes["m"], sizes["n"], sizes["k"], dtype)
        return self._checked(*_proven_sizes(tensors, sizes), dtype)

    @staticmethod
    def _checked(m, n, k, dtype) -> Problem:
        if dtype not in HLO_TYPES:
            raise Skip(f"dtype {dtype}: the tile models know bf16, f16 and f32 matrix products")
        for name, v in (("M", m), ("N", n), ("K", k)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise Skip(f"{name} is {v!r}, not a size")
        return Problem(m, n, k, dtype)

    def _tile(self, config, named_args, kwargs) -> Optional[Tile]:
        """The candidate's tile, or None when its values are beyond what a tile row says
        (num_ctas > 1): the model cannot judge it, so it is measured."""
        values = {}
        for role, names in self.names.items():
            for name in names:
                for source in (config.kwargs, kwargs, named_args):
                    if name in source:
                        values[role] = source[name]
                        break
                if role in values:
                    break
            if role not in values:
                none = not any(n in config.kwargs for ns in self.names.values() for n in ns)
                raise Skip(f"its configurations have no {role.upper()} (looked for {', '.join(names)}): "
                           + ("if it is not a matrix product there is nothing to do; if it is, " if none else "")
                           + f"give names={{'{role}': NAME}}")
        if (getattr(config, "num_ctas", 1) or 1) != 1:
            return None
        try:
            return Tile(int(values["block_m"]), int(values["block_n"]), int(values["block_k"]),
                        int(config.num_warps), int(config.num_stages))
        except (TypeError, ValueError):
            return None

    def _axes(self):
        """The values of the model's tile space (block_m, block_n, block_k, warps, stages):
        asked once per collection and process."""
        if self._shortlist is not None:
            return self._shortlist.axes, self._shortlist.gpu
        where = (self._client._address, self.collection)
        with self._lock:
            if where in _spaces:
                return _spaces[where]
        self._check_up()
        try:
            model = next((m for m in self._client.models() if m.collection == self.collection), None)
        except TgraphError as e:
            self._note_down(e)
            raise Skip(f"the server did not list its models ({e.code.name}): {e.message}", "server") from None
        if model is None or not model.tile_space:
            raise Skip(f"the server has no tile model {self.collection}" +
                       (" (its model has no tile space)" if model else ""), "refused")
        space = json.loads(model.tile_space)
        axes = tuple(frozenset(space[k]) for k in ("block_m", "block_n", "block_k", "num_warps", "num_stages"))
        with self._lock:
            _spaces[where] = axes, str(space.get("gpu", ""))
        return _spaces[where]

    def _check_gpu(self, label: str, gpu: str, collection_gpu: str):
        """On another GPU than the collection's: said once; the model's order still prunes
        (a nearby GPU's order beats none), and nothing measured here is reported (the
        server would refuse it: a collection holds one GPU's timings)."""
        if same_gpu(gpu, collection_gpu):
            return
        self.other_gpu = True
        self._warn_once(label, "gpu", f"this GPU is '{gpu}' and {self.collection} is a model of '{collection_gpu}': "
                        f"the candidates are pruned in that GPU's order and what Triton measures here is not "
                        f"reported (a model of this GPU: docs/tile-model.md)")

    def _check_up(self):
        if time.monotonic() < self._down_until:
            raise Skip(f"the server did not answer a moment ago (asked again "
                       f"{self._down_until - time.monotonic():.0f} s from now)", "server")

    def _note_down(self, e: TgraphError):
        """Not asked again for a while, so that a dead server costs a deadline now and then
        rather than one per key: at once when no connection could be made (UNAVAILABLE),
        after TIMEOUTS_BEFORE_DOWN prunes in a row ran out of time on a connected server (one
        slow answer in a burst is not a dead server); a busy one (RESOURCE_EXHAUSTED after
        its retries) is asked again by the next key. Left alone RETRY_FIRST seconds, twice
        that each time it stays silent, up to RETRY_AFTER: a restarting server (seconds) is
        asked again soon, a dead one about twice a minute."""
        if e.code == grpc.StatusCode.DEADLINE_EXCEEDED:
            self._timeouts += 1
        if e.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            self.stats["unanswered"] += 1
        if e.code == grpc.StatusCode.UNAVAILABLE or self._timeouts >= TIMEOUTS_BEFORE_DOWN:
            self._timeouts = 0
            self._down_until = time.monotonic() + self._left_alone
            self._left_alone = min(2 * self._left_alone, RETRY_AFTER)

    def _order(self, problem: Problem, kernel: Optional[TileKernel]):
        """The model's order of the problem's tile names, best first, and their scores."""
        if self._shortlist is not None:
            return self._listed(problem, kernel)
        key = (kernel, problem)
        with self._lock:
            if key in self._orders:
                self._orders.move_to_end(key)
                return self._orders[key]
        self._check_up()
        self.stats["searches"] += 1
        start = time.monotonic()
        try:
            found = self._client.search_tiles(self.collection, gemm_module(problem.m, problem.n, problem.k,
                                                                           problem.dtype),
                                              results=1000, kernel=kernel)
        except TgraphError as e:
            waited = time.monotonic() - start
            self._note_down(e)
            down = e.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
            raise Skip(f"the server could not rank {problem.name} ({e.code.name} after {waited:.2f} s): "
                       f"{e.message}", "server" if down else "refused") from None
        order = (list(found.tiles), [float(x) for x in found.scores], dict(getattr(found, "measured", {}) or {}))
        self._timeouts, self._left_alone = 0, RETRY_FIRST
        with self._lock:
            self._orders[key] = order
            while len(self._orders) > 1024:
                self._orders.popitem(last=False)
        return order

    def _listed(self, problem: Problem, kernel: Optional[TileKernel]):
        listed = self._shortlist
        if listed.kernel is not None and kernel is not None and listed.kernel.name != kernel.name:
            raise Skip(f"the shortlist {listed.path} is for the kernel {listed.kernel.name}", "refused")
        found = listed.order(problem)
        if found is None:
            self.stats["shortlist_misses"] += 1
            raise Skip(f"{problem.name} is not in the shortlist {listed.path} ({len(listed.orders)} shapes; "
                       f"write_shortlist with it adds it)", "shortlist")
        return found + ({},)

    def _fallback(self, label: str, why: str, kind: str):
        self.stats["fallbacks"] += 1
        self._warn_once(label, kind, f"every candidate is measured, as Triton alone would: {why}")

    def _warn_once(self, label: str, kind: str, message: str):
        # One warning per kernel and kind of reason (a dead server: one, not one per key).
        with self._lock:
            if (label, kind) in self._warned:
                return
            self._warned.add((label, kind))
        warnings.warn(f"tgraph.triton: {label}: {message}", RuntimeWarning, stacklevel=4)

    def close(self):
        _reporter.flush(self.deadline)
        self._client.close()


def prune_configs_by(collection: Optional[str] = None, **options) -> dict:
    """What `triton.autotune(..., prune_configs_by=...)` takes: {"early_config_prune":
    Pruner(collection, **options)}; prune_configs_by(shortlist=FILE) needs no server."""
    return {"early_config_prune": Pruner(collection, **options)}


_spaces = {}  # (address, collection) -> its tile space's values per parameter and its GPU (Pruner._axes)


def _inside(tile: Tile, axes) -> bool:
    return all(v in values for v, values in zip((tile.block_m, tile.block_n, tile.block_k, tile.num_warps,
                                                 tile.num_stages), axes))


# --- every autotuned kernel of a process ------------------------------------------
_installed = {}


def install(collection: Optional[str] = None, **options) -> Pruner:
    """Prunes every autotuned kernel of the process with one Pruner (options as Pruner's),
    after the kernel's own early_config_prune and perf_model: Triton's
    Autotuner.prune_configs is wrapped. A kernel already given a tgraph prune function
    keeps its own. Returns the Pruner; uninstall() undoes it."""
    from triton.runtime.autotuner import Autotuner
    uninstall()
    pruner = Pruner(collection, **options)
    original = Autotuner.prune_configs

    def prune_configs(self, kwargs):
        pruned = original(self, kwargs)
        if isinstance(self.early_config_prune, Pruner) or len(pruned) <= 1:
            return pruned
        return pruner.prune(pruned, self.nargs, kwargs, kernel=kernel_of(self.fn), autotuner=self)

    prune_configs.tgraph_original = original
    Autotuner.prune_configs = prune_configs
    _installed["pruner"] = pruner
    return pruner


def uninstall():
    """Undoes install(): Triton's own prune_configs again."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return
    original = getattr(Autotuner.prune_configs, "tgraph_original", None)
    if original is not None:
        Autotuner.prune_configs = original
    _installed.pop("pruner", None)


# --- what Triton measured, back to the server ------------------------------------
_local = threading.local()


def _pending(pruner: Pruner, record: dict, kept: list):
    """What this thread's tuning will measure: Triton benchmarks the candidates and calls
    the listener on the same thread before its next prune."""
    if pruner.report and not pruner.other_gpu:
        _reporter.install()
        _local.pending = (pruner, record, {id(c) for c in kept})


class _Reporter:
    """Chained into knobs.autotuning.listener; sends each tuning's timings from one
    background thread (a bounded queue: a tuning never waits for the server)."""

    def __init__(self):
        self._queue = queue.Queue(maxsize=256)
        self._thread = None
        self._previous = None
        self._installed = False
        self._lock = threading.Lock()

    def install(self):
        with self._lock:
            if self._installed:
                return
            import triton
            self._previous = triton.knobs.autotuning.listener
            triton.knobs.autotuning.listener = self.listen
            self._thread = threading.Thread(target=self._run, name="tgraph-report", daemon=True)
            self._thread.start()
            self._installed = True
            atexit.register(self.flush, DEFAULT_DEADLINE * 2)

    def listen(self, **event):
        try:
            self._take(event)
        finally:
            if self._previous is not None:
                self._previous(**event)

    def _take(self, event):
        pending = getattr(_local, "pending", None)
        _local.pending = None
        timings = event.get("configs_timings") or {}
        if pending is None or event.get("cache_hit") or not timings:
            return
        pruner, record, kept = pending
        if not {id(c) for c in timings} <= kept or record["problem"] is None:
            return  # another autotuner's tuning, or one whose problem was never known
        kernel = record["kernel"] or kernel_of(event.get("fn"))
        measured = []
        for config, t in timings.items():
            tile = record["tiles"].get(id(config))  # None: beyond a tile row (num_ctas > 1)
            ms = t[0] if isinstance(t, (list, tuple)) else t
            if isinstance(ms, (int, float)) and 0 < ms < float("inf"):
                measured.append((tile, max(1, int(round(ms * 1e6)))))
        if not measured or kernel is None:
            return
        try:
            self._queue.put_nowait((pruner, record["problem"], kernel, measured))
        except queue.Full:
            pruner.stats["reports_dropped"] += 1

    def _send(self, pruner, problem, kernel, measured):
        axes, _ = pruner._axes()
        inside = [(tile, ns) for tile, ns in measured if tile is not None and _inside(tile, axes)]
        pruner.stats["outside_space"] += len(measured) - len(inside)
        if inside:
            pruner._client.report_measurements(pruner.collection, gemm_module(problem.m, problem.n, problem.k,
                                                                              problem.dtype),
                                               [t.name for t, _ in inside], [ns for _, ns in inside],
                                               source=pruner.source, kernel=kernel)
            pruner.stats["reported"] += len(inside)

    def _run(self):
        while True:
            item = self._queue.get()
            try:
                pruner = item[0]
                try:
                    self._send(*item)
                except Exception as e:  # a report lost is a warning, never the user's error
                    pruner.stats["report_errors"] += 1
                    code = getattr(getattr(e, "code", None), "name", type(e).__name__)
                    # The tuning itself is done and unaffected: say what was lost, not a fallback.
                    pruner._warn_once(item[2].name, "report",
                                      f"the measurements of {item[1].name} were not reported ({code}: "
                                      f"{getattr(e, 'message', e)}); the tuning is unaffected, the next key of this "
                                      f"kernel will not start from them")
            finally:
                self._queue.task_done()

    def flush(self, timeout: float):
        """Waits up to `timeout` s for the reports in flight."""
        end = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < end:
            time.sleep(0.01)


_reporter = _Reporter()


def flush(timeout: float = 10.0) -> bool:
    """Waits up to `timeout` s until every measurement taken so far was sent; whether all were."""
    _reporter.flush(timeout)
    return not _reporter._queue.unfinished_tasks
