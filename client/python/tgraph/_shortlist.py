"""A shortlist file: a tile model's order of a kernel's candidates for a set of shapes,
written where a tgraph-server is (write_shortlist) and read where none is
(tgraph.triton.Pruner(shortlist=FILE)): a GPU host that cannot reach a server still
measures only the model's best few.

The file is JSON (docs/python.md, "Without a server"):
  {"format": "tgraph-triton-shortlist", "version": 1, "collection": "tile@h100-triton",
   "model_version": 3, "gpu": "NVIDIA H100 80GB HBM3" (the model's; files before it was kept: none),
   "kernel": {"name": "matmul_kernel", "source_hash": "..."} or null,
   "tile_space": {"block_m": [...], "block_n": [...], "block_k": [...], "num_warps": [...],
                  "num_stages": [...]},
   "problems": [{"m": 1024, "n": 512, "k": 2048, "dtype": "bf16",
                 "order": ["128x64x64 w4 s3", ...], "scores": [...]}, ...],
   "refused": [{"m": ..., "n": ..., "k": ..., "dtype": ..., "why": "FAILED_PRECONDITION: ..."}]}
"""
import json
import os
import tempfile
from typing import Dict, Iterable, List, Optional, Tuple

import grpc

from ._client import Client, TileKernel
from ._errors import TgraphError
from ._gemm import HLO_TYPES, Problem, gemm_module, parse_tile

FORMAT = "tgraph-triton-shortlist"
VERSION = 1
AXES = ("block_m", "block_n", "block_k", "num_warps", "num_stages")


class ShortlistError(ValueError):
    """A shortlist file that cannot be read: the message names the file and the key."""


def _problem(item, where: str) -> Problem:
    if isinstance(item, Problem):
        return item
    try:
        m, n, k, dtype = item
    except (TypeError, ValueError):
        raise ValueError(f"{where}: a Problem or (M, N, K, dtype), got {item!r}") from None
    for name, v in (("M", m), ("N", n), ("K", k)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{where}: {name} is {v!r}, not a size")
    if dtype not in HLO_TYPES:
        raise ValueError(f"{where}: dtype {dtype!r}, expected one of {sorted(HLO_TYPES)}")
    return Problem(m, n, k, dtype)


def write_shortlist(path: str, collection: str, problems: Iterable, *, kernel=None,
                    address: str = "127.0.0.1:50051", client: Optional[Client] = None) -> dict:
    """Asks the server for the model's order of every candidate of each problem (a
    Problem or (M, N, K, dtype)) and writes them to `path` (atomically). kernel: the
    kernel the orders are for (a TileKernel or a @triton.jit function: the server joins
    what was measured of it); None: the model's order for any kernel. A problem the model
    refuses (a dtype or variant it never measured) is listed under "refused" with why.
    Returns {"problems": written, "refused": count}."""
    if kernel is not None and not isinstance(kernel, TileKernel):
        from .triton import kernel_of
        kernel = kernel_of(kernel)
    wanted = [_problem(p, f"problems[{i}]") for i, p in enumerate(problems)]
    own = client is None
    client = client or Client(address)
    try:
        model = next((m for m in client.models() if m.collection == collection), None)
        if model is None or not model.tile_space:
            raise TgraphError(grpc.StatusCode.NOT_FOUND, f"the server has no tile model {collection}")
        space = json.loads(model.tile_space)
        written, refused = [], []
        for p in wanted:
            try:
                found = client.search_tiles(collection, gemm_module(p.m, p.n, p.k, p.dtype), results=1000,
                                            kernel=kernel)
            except TgraphError as e:
                refused.append({"m": p.m, "n": p.n, "k": p.k, "dtype": p.dtype,
                                "why": f"{getattr(e.code, 'name', e.code)}: {e.message}"})
                continue
            written.append({"m": p.m, "n": p.n, "k": p.k, "dtype": p.dtype, "order": list(found.tiles),
                            "scores": [float(x) for x in found.scores]})
    finally:
        if own:
            client.close()
    doc = {"format": FORMAT, "version": VERSION, "collection": collection, "model_version": model.version,
           "gpu": str(space.get("gpu", "")),
           "kernel": {"name": kernel.name, "source_hash": kernel.source_hash} if kernel else None,
           "tile_space": {axis: sorted(int(v) for v in space[axis]) for axis in AXES},
           "problems": written, "refused": refused}
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".shortlist-", dir=folder)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)
    return {"problems": len(written), "refused": len(refused)}


class Shortlist:
    """A shortlist file, read and checked: orders by (M, N, K, dtype)."""

    def __init__(self, path: str):
        self.path = path
        try:
            with open(path) as f:
                doc = json.load(f)
        except OSError as e:
            raise ShortlistError(f"shortlist {path}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise ShortlistError(f"shortlist {path}: not JSON (line {e.lineno}: {e.msg})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ShortlistError(f"shortlist {path}: \"format\" is not \"{FORMAT}\" (write it with "
                                 f"tgraph.triton.write_shortlist)")
        if doc.get("version") != VERSION:
            raise ShortlistError(f"shortlist {path}: \"version\" {doc.get('version')!r}, this client reads {VERSION}")
        self.collection = self._field(doc, "collection", str)
        self.gpu = doc.get("gpu", "")
        if not isinstance(self.gpu, str):
            raise ShortlistError(f"shortlist {path}: \"gpu\" is not a string (the GPU its model was measured on)")
        kernel = doc.get("kernel")
        if kernel is not None and not isinstance(kernel, dict):
            raise ShortlistError(f"shortlist {path}: \"kernel\" is not an object or null")
        self.kernel = None if kernel is None else TileKernel(self._field(kernel, "name", str, "kernel."),
                                                              self._field(kernel, "source_hash", str, "kernel."))
        space = self._field(doc, "tile_space", dict)
        self.axes = tuple(frozenset(self._field(space, axis, list, "tile_space.")) for axis in AXES)
        self.orders: Dict[Tuple[int, int, int, str], Tuple[List[str], List[float]]] = {}
        for i, entry in enumerate(self._field(doc, "problems", list)):
            where = f"problems[{i}]"
            if not isinstance(entry, dict):
                raise ShortlistError(f"shortlist {path}: {where} is not an object")
            try:
                p = _problem(tuple(entry.get(key) for key in ("m", "n", "k", "dtype")), where)
            except ValueError as e:
                raise ShortlistError(f"shortlist {path}: {e}") from None
            order = self._field(entry, "order", list, where + ".")
            scores = self._field(entry, "scores", list, where + ".")
            if len(scores) != len(order):
                raise ShortlistError(f"shortlist {path}: {where} has {len(order)} names in \"order\" and "
                                     f"{len(scores)} \"scores\"")
            for j, name in enumerate(order):
                try:
                    parse_tile(name)
                except (ValueError, AttributeError):
                    raise ShortlistError(f"shortlist {path}: {where}.order[{j}] is {name!r}, not a tile "
                                         f"configuration (e.g. '128x128x64 w4 s3')") from None
            self.orders[(p.m, p.n, p.k, p.dtype)] = (list(order), [float(x) for x in scores])

    def _field(self, obj, key, kind, prefix=""):
        if key not in obj or not isinstance(obj[key], kind):
            raise ShortlistError(f"shortlist {self.path}: \"{prefix}{key}\" is missing or not a {kind.__name__}")
        return obj[key]

    def order(self, problem: Problem) -> Optional[Tuple[List[str], List[float]]]:
        return self.orders.get((problem.m, problem.n, problem.k, problem.dtype))
