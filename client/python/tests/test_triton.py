"""tgraph.triton inside the real Triton autotuner (the test environment's Triton), against a
real tgraph-server with a tile model trained on the real H100 measurements.

Triton's Autotuner runs as it does on a GPU; only the kernel's launch (a stand-in that
records the configuration, as tests/triton_autotuner_test.py explains) and the benchmark
function (the test's, returning a runtime the test chose) stand in for the GPU. Run by
ctest (triton_pruner)."""
import glob
import json
import io
import itertools
import os
import queue
import socket
import sys
import threading
import time
import warnings

import grpc
import numpy as np
import pytest

import tgraph
import subprocess

from conftest import REAL, Server, binary, run

try:
    import triton
    import triton.language as tl
    import tgraph.triton as tt
except ImportError as e:
    pytest.fail(f"{e.name} is missing from {sys.executable}: run scripts/install-deps --test", pytrace=False)

COLLECTION = "tile@h100-triton"


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    rn = tl.arange(0, BLOCK_SIZE_N)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_SIZE_K):
        rk = k + tl.arange(0, BLOCK_SIZE_K)
        acc += tl.dot(tl.load(a_ptr + rm[:, None] * K + rk[None, :]), tl.load(b_ptr + rk[:, None] * N + rn[None, :]))
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def odd_names_kernel(x_ptr, w_ptr, y_ptr, rows, cols, depth, ROWS_PER_PROGRAM: tl.constexpr,
                     COLS_PER_PROGRAM: tl.constexpr, DEPTH_PER_STEP: tl.constexpr):
    tl.store(y_ptr + tl.arange(0, ROWS_PER_PROGRAM), tl.load(x_ptr + tl.arange(0, ROWS_PER_PROGRAM)))


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr):
    tl.store(y_ptr + tl.arange(0, BLOCK_SIZE), tl.load(x_ptr + tl.arange(0, BLOCK_SIZE)))


class Tensor:
    """What the autotuner and the pruner read of a tensor: dtype and shape."""

    def __init__(self, dtype, *shape):
        self.dtype, self.shape = dtype, shape


class Launch:
    """The kernel's launch, recording the configuration of every run."""

    def __init__(self, jit_fn):
        self.fn, self.arg_names, self.launches = jit_fn, jit_fn.arg_names, []

    def run(self, *args, **kwargs):
        self.launches.append(kwargs)


def space_configs(extra=()):
    """The model's space as Triton Configs (GROUP_SIZE_M 8, as the tutorial's), and extras."""
    return [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8}, num_warps=w,
                          num_stages=s)
            for m, n, k, w, s in itertools.product((32, 64, 128, 256), (32, 64, 128, 256), (32, 64, 128), (4, 8),
                                                   (2, 3, 4))] + list(extra)


UNKNOWN = [triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 8}, num_warps=4,
                         num_stages=3),
           triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}, num_warps=4,
                         num_stages=5),
           triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}, num_warps=4,
                         num_stages=3, num_ctas=2)]


def fake_ms(config):
    """A runtime the test knows for each configuration (ms), distinct for each."""
    kw = config.kwargs
    m, n, k = ([v for key, v in kw.items() if key != "GROUP_SIZE_M"] + [1, 1])[:3]
    return 0.01 * (1 + m / 256 + n / 512 + k / 1024 + config.num_warps / 64 + config.num_stages / 128 +
                   config.num_ctas / 4)


def tuner(jit_fn, configs, key, prune=None):
    launch = Launch(jit_fn)
    benched = []

    def do_bench(kernel_call, quantiles):
        kernel_call()
        run = launch.launches[-1]
        config = next(c for c in configs if all(run.get(k) == v for k, v in c.all_kwargs().items()))
        benched.append(config)
        t = fake_ms(config)
        return [t, t, t]

    autotuner = triton.autotune(configs=configs, key=key, do_bench=do_bench,
                                prune_configs_by={"early_config_prune": prune} if prune else None)(launch)
    return autotuner, launch, benched


def gemm_call(autotuner, m, n, k, dtype="torch.bfloat16"):
    autotuner[(1,)](Tensor(dtype, m, k), Tensor(dtype, k, n), Tensor(dtype, m, n), m, n, k)


def name(config):
    kw = config.kwargs
    return f"{kw['BLOCK_SIZE_M']}x{kw['BLOCK_SIZE_N']}x{kw['BLOCK_SIZE_K']} w{config.num_warps} s{config.num_stages}"


@pytest.fixture(scope="module")
def server(tile_server, tmp_path_factory):
    """The tile model served with a measurement store of this module's own."""
    tmp = str(tmp_path_factory.mktemp("triton"))
    s = Server(tile_server.registry, tmp, extra=["--measurement_store", os.path.join(tmp, "store")])
    s.store = os.path.join(tmp, "store")
    yield s
    s.stop()


def shards(server):
    return sorted(glob.glob(os.path.join(server.store, "npz", "tile", "@h100-triton", "train", "*.npz")))


def test_only_the_models_top_k_are_benchmarked_and_they_are_the_servers_best(server):
    configs = space_configs()
    pruner = tt.Pruner(COLLECTION, address=server.address, top_k=3, report=False)
    autotuner, launch, benched = tuner(matmul_kernel, configs, ["M", "N", "K"], pruner)
    gemm_call(autotuner, 1024, 512, 2048)  # a shape the H100 set never measured
    expected = tgraph.Client(server.address).search_tiles(COLLECTION, tt.gemm_module(1024, 512, 2048, "bf16"),
                                                          results=3, kernel=tt.kernel_of(matmul_kernel)).tiles
    assert [name(c) for c in benched] == expected and len(benched) == 3
    assert autotuner.best_config is min(benched, key=fake_ms)
    assert all(any(c is b for c in configs) for b in benched)  # the user's own objects
    assert pruner.last["kernel"] == tt.kernel_of(matmul_kernel) and pruner.last["kernel"].name == "matmul_kernel"
    assert pruner.stats["searches"] == 1 and pruner.stats["skipped"] == 288 - 3
    gemm_call(autotuner, 1024, 512, 2048)  # cached by Triton: no prune, no call
    assert pruner.stats["prunes"] == 1 and len(benched) == 3


def test_candidates_outside_the_models_space_are_kept_and_measured(server):
    configs = space_configs(UNKNOWN)
    pruner = tt.Pruner(COLLECTION, address=server.address, top_k=2, report=False)
    autotuner, _, benched = tuner(matmul_kernel, configs, ["M", "N", "K"], pruner)
    gemm_call(autotuner, 2048, 256, 1024)
    assert len(benched) == 2 + 3
    assert benched[2:] == UNKNOWN  # another BLOCK_K, five stages, two CTAs: measured after the model's two


def test_top_k_one_launches_the_models_first_pick_without_benchmarking(server):
    pruner = tt.Pruner(COLLECTION, address=server.address, top_k=1, report=False)
    autotuner, launch, benched = tuner(matmul_kernel, space_configs(), ["M", "N", "K"], pruner)
    gemm_call(autotuner, 512, 1024, 1024, dtype="torch.float32")
    assert benched == [] and len(launch.launches) == 1
    first = tgraph.Client(server.address).search_tiles(COLLECTION, tt.gemm_module(512, 1024, 1024, "f32"),
                                                       results=1).tiles[0]
    assert name(autotuner.best_config) == first


def test_a_dead_server_costs_at_most_the_deadline_then_every_candidate_is_measured(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    configs = space_configs()
    pruner = tt.Pruner(COLLECTION, address=f"127.0.0.1:{port}", deadline=0.5, report=False)
    autotuner, _, benched = tuner(matmul_kernel, configs, ["M", "N", "K"], pruner)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.monotonic()
        gemm_call(autotuner, 1024, 512, 2048)
        first = time.monotonic() - start
        gemm_call(autotuner, 2048, 512, 1024)
    assert first < 0.5 + 0.4 and len(benched) == 2 * len(configs)
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(said) == 1 and "UNAVAILABLE" in said[0] and "every candidate is measured" in said[0]
    assert pruner.stats["unanswered"] == 1  # the second key did not wait for it again


def test_one_slow_answer_in_a_burst_does_not_mark_the_server_down_but_three_in_a_row_do_and_silence_doubles_the_wait():
    pruner = tt.Pruner(COLLECTION, address="127.0.0.1:1", report=False)
    slow = tgraph.TgraphError(grpc.StatusCode.DEADLINE_EXCEEDED, "SearchConfigs: Deadline Exceeded")
    for _ in range(tt.TIMEOUTS_BEFORE_DOWN - 1):
        pruner._note_down(slow)
        pruner._check_up()  # still asked
    pruner._timeouts = 0  # an answer in between (as _order does) starts the count again
    for _ in range(tt.TIMEOUTS_BEFORE_DOWN - 1):
        pruner._note_down(slow)
    pruner._note_down(tgraph.TgraphError(grpc.StatusCode.RESOURCE_EXHAUSTED, "busy"))  # alive, only busy
    pruner._check_up()
    pruner._note_down(slow)
    with pytest.raises(tt.Skip, match="did not answer a moment ago"):
        pruner._check_up()
    fresh = tt.Pruner(COLLECTION, address="127.0.0.1:1", report=False)
    gone = tgraph.TgraphError(grpc.StatusCode.UNAVAILABLE, "failed to connect")
    left_alone = []
    for _ in range(6):  # no server: at once, 2 s, then twice that each time, up to 30 s
        fresh._note_down(gone)
        with pytest.raises(tt.Skip):
            fresh._check_up()
        left_alone.append(round(fresh._down_until - time.monotonic()))
    assert left_alone == [2, 4, 8, 16, 30, 30]
    fresh._down_until = 0.0
    fresh._timeouts, fresh._left_alone = 0, tt.RETRY_FIRST  # what an answer does (_order)
    fresh._note_down(gone)
    assert round(fresh._down_until - time.monotonic()) == 2


def test_a_server_that_accepts_but_never_answers_costs_at_most_the_deadline():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held = []
    threading.Thread(target=lambda: [held.append(listener.accept()) for _ in range(4)], daemon=True).start()
    try:
        pruner = tt.Pruner(COLLECTION, address=f"127.0.0.1:{listener.getsockname()[1]}", deadline=0.6, report=False)
        autotuner, _, benched = tuner(matmul_kernel, space_configs(), ["M", "N", "K"], pruner)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.monotonic()
            gemm_call(autotuner, 1024, 512, 2048)
            waited = time.monotonic() - start
        # gRPC gives up on a connection that sends no HTTP/2 SETTINGS before the deadline.
        assert waited < 0.6 + 0.4 and len(benched) == 288
        assert "UNAVAILABLE" in str(caught[0].message) or "DEADLINE_EXCEEDED" in str(caught[0].message)
    finally:
        for conn, _ in held:
            conn.close()


class DelayingProxy:
    """A TCP proxy to `target` that holds every chunk `delay` seconds in each direction
    (order kept), as a server one network hop of 2 x delay away would."""

    def __init__(self, target, delay):
        self.target, self.delay = target, delay
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            host, port = self.target.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            for a, b in ((client, upstream), (upstream, client)):
                held = queue.Queue()
                threading.Thread(target=self._read, args=(a, held), daemon=True).start()
                threading.Thread(target=self._write, args=(b, held), daemon=True).start()

    def _read(self, sock, held):
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            held.put((time.monotonic() + self.delay, data))
            if not data:
                return

    @staticmethod
    def _write(sock, held):
        while True:
            due, data = held.get()
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                if not data:
                    sock.shutdown(socket.SHUT_WR)
                    return
                sock.sendall(data)
            except OSError:
                return

    def close(self):
        self.listener.close()


def test_a_server_80_ms_away_each_way_is_pruned_within_the_deadline(server):
    """Connecting alone takes several round trips of 160 ms: the pruner's first call gets
    what the deadline leaves, and gRPC's connection attempt is not cut at 100 ms."""
    proxy = DelayingProxy(server.address, 0.08)
    try:
        for attempt in range(3):  # a new process each time: a new connection, a new key
            pruner = tt.Pruner(COLLECTION, address=proxy.address, top_k=3, report=False)
            autotuner, _, benched = tuner(matmul_kernel, space_configs(), ["M", "N", "K"], pruner)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                start = time.monotonic()
                gemm_call(autotuner, 1024, 512, 2048 + 256 * attempt)
                waited = time.monotonic() - start
            said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
            assert said == [] and len(benched) == 3, (attempt, pruner.last["why"])
            assert 0.32 < waited < tt.DEFAULT_DEADLINE
            assert pruner.stats["fallbacks"] == 0
    finally:
        proxy.close()


def test_a_dtype_the_model_never_measured_measures_every_candidate_and_says_why(server):
    pruner = tt.Pruner(COLLECTION, address=server.address, report=False)
    autotuner, _, benched = tuner(matmul_kernel, space_configs(), ["M", "N", "K"], pruner)
    with pytest.warns(RuntimeWarning, match=r"FAILED_PRECONDITION.*f16"):
        gemm_call(autotuner, 1024, 512, 2048, dtype="torch.float16")
    assert len(benched) == 288


def test_a_kernel_variant_the_model_never_measured_measures_every_candidate(server):
    pruner = tt.Pruner(COLLECTION, address=server.address, report=False)
    autotuner, _, benched = tuner(matmul_kernel, space_configs(), ["M", "N", "K"], pruner)
    with pytest.warns(RuntimeWarning, match=r"FAILED_PRECONDITION.*N and K not multiples of 16"):
        gemm_call(autotuner, 1000, 700, 1400)  # N and K not multiples of 16: another kernel
    assert len(benched) == 288


NAMES = {"block_m": "ROWS_PER_PROGRAM", "block_n": "COLS_PER_PROGRAM", "block_k": "DEPTH_PER_STEP"}


def odd_name(c):
    kw = c.kwargs
    return f"{kw['ROWS_PER_PROGRAM']}x{kw['COLS_PER_PROGRAM']}x{kw['DEPTH_PER_STEP']} w{c.num_warps} s{c.num_stages}"


def test_a_kernel_with_other_parameter_names_is_pruned_with_the_users_mapping(server):
    configs = [triton.Config({"ROWS_PER_PROGRAM": m, "COLS_PER_PROGRAM": n, "DEPTH_PER_STEP": k}, num_warps=w, num_stages=s)
               for m, n, k, w, s in itertools.product((64, 128), (64, 128), (32, 64), (4, 8), (3, 4))]

    def bench_with(pruner):
        autotuner, _, benched = tuner(odd_names_kernel, configs, ["rows", "cols", "depth"], pruner)
        autotuner[(1,)](Tensor("torch.bfloat16", 2048, 1024), Tensor("torch.bfloat16", 1024, 256),
                        Tensor("torch.bfloat16", 2048, 256), 2048, 256, 1024)
        return benched

    with pytest.warns(RuntimeWarning, match="no BLOCK_M"):
        assert len(bench_with(tt.Pruner(COLLECTION, address=server.address, report=False))) == len(configs)
    mapped = tt.Pruner(COLLECTION, address=server.address, top_k=2, report=False,
                       names=NAMES,
                       problem={"m": "rows", "n": "cols", "k": "depth", "a": "x_ptr"})
    benched = bench_with(mapped)
    assert len(benched) == 2 and mapped.last["problem"] == tt.Problem(2048, 256, 1024, "bf16")
    order = tgraph.Client(server.address).search_tiles(COLLECTION, tt.gemm_module(2048, 256, 1024, "bf16"),
                                                       results=1000).tiles
    ours = {odd_name(c) for c in configs}
    best = [t for t in order if t in ours][:2]
    assert [odd_name(c) for c in benched] == best
    # A callable says the problem as well.
    by_fn = tt.Pruner(COLLECTION, address=server.address, top_k=2, report=False,
                      names=NAMES,
                      problem=lambda args: (args["rows"], args["cols"], args["depth"], args["x_ptr"].dtype))
    assert bench_with(by_fn) == benched


def test_install_prunes_every_autotuned_kernel_without_editing_a_decorator(server):
    gemm, _, gemm_benched = tuner(matmul_kernel, space_configs(), ["M", "N", "K"])
    softmax_configs = [triton.Config({"BLOCK_SIZE": b}, num_warps=w) for b in (256, 512, 1024) for w in (4, 8)]
    soft, _, soft_benched = tuner(softmax_kernel, softmax_configs, ["n"])
    pruner = tt.install(COLLECTION, address=server.address, top_k=3, report=False)
    try:
        gemm_call(gemm, 2048, 256, 1024)
        with pytest.warns(RuntimeWarning, match="softmax_kernel.*no BLOCK_M"):
            soft[(1,)](Tensor("torch.float32", 4096), Tensor("torch.float32", 4096), 4096)
    finally:
        tt.uninstall()
    assert len(gemm_benched) == 3 and len(soft_benched) == len(softmax_configs)
    assert pruner.last["kernel"].name == "softmax_kernel"
    gemm_call(gemm, 4096, 256, 1024)  # uninstalled: Triton measures everything again
    assert len(gemm_benched) == 3 + 288


def test_what_triton_measured_reaches_the_store_and_the_next_keys_prior(server):
    kernel = tt.kernel_of(matmul_kernel)
    client = tgraph.Client(server.address)
    nearby = tt.gemm_module(1024, 1024, 2048, "bf16")
    before = client.search_tiles(COLLECTION, nearby, results=5, kernel=kernel)
    assert before.kernel_problems == 0
    pruner = tt.Pruner(COLLECTION, address=server.address, top_k=4, source="test farm")
    autotuner, _, benched = tuner(matmul_kernel, space_configs(UNKNOWN), ["M", "N", "K"], pruner)
    gemm_call(autotuner, 1024, 512, 2048)
    assert tt.flush(10)
    assert pruner.stats["reported"] == 4 and pruner.stats["outside_space"] == 3  # the unknown three are not rows
    (path,) = shards(server)
    npz = np.load(path)
    # No GPU named (no CUDA device here): the collection's, as the server stored it.
    assert bytes(npz["tgraph_kernel"]).decode() == f"matmul_kernel@{kernel.source_hash}/NVIDIA H100 80GB HBM3"
    assert bytes(npz["tgraph_source"]).decode() == "test farm"
    stored = sorted(int(x) for x in npz["config_runtime"])
    assert stored == sorted(int(round(fake_ms(c) * 1e6)) for c in benched[:4])
    # The next key of the same kernel counts what was measured; another kernel does not.
    after = client.search_tiles(COLLECTION, nearby, results=5, kernel=kernel)
    assert after.kernel_problems == 1
    other = client.search_tiles(COLLECTION, nearby, results=5, kernel=tgraph.TileKernel("matmul_kernel", "0" * 16))
    assert other.kernel_problems == 0 and other.tiles == before.tiles
    # The store is read again by a restarted server: listed before it serves, read while
    # it serves (its log says when).
    indexed = lambda: open(server.log.name).read().count(" tile shards indexed in ")  # noqa: E731
    already = indexed()
    server.stop()
    server.start()
    for _ in range(300):
        if indexed() > already:
            break
        time.sleep(0.1)
    assert "measurement store: 1 tile shards indexed in " in open(server.log.name).read()
    assert tgraph.Client(server.address).search_tiles(COLLECTION, nearby, results=5, kernel=kernel).kernel_problems == 1
    # tgraph-train finetune reads them by kernel: one problem is too little evidence to
    # publish; a kernel the store never heard of is named as missing.
    finetune = [binary("model", "train", "tgraph-train"), "finetune", "--registry", server.registry, "--collection",
                COLLECTION, "--measurements", server.store, "--run_dir", os.path.join(server.store, "..", "finetune"),
                "--progress=false"]
    said = run(finetune).stdout
    assert f"too little evidence: 1 measured problems of kernel matmul_kernel@{kernel.source_hash}/NVIDIA H100" in said
    missing = subprocess.run(finetune + ["--kernel", "matmul_kernel@0000"], capture_output=True, text=True)
    assert missing.returncode == 1 and "has no measurements of it" in missing.stderr
    assert f"(it has: matmul_kernel@{kernel.source_hash}/NVIDIA H100 80GB HBM3)" in missing.stderr


def test_a_listener_set_before_is_still_called(server):
    heard = []
    saved = tt._reporter._previous
    tt._reporter._previous = lambda **kw: heard.append(kw["key"])
    try:
        pruner = tt.Pruner(COLLECTION, address=server.address, top_k=2)
        autotuner, _, _ = tuner(matmul_kernel, space_configs(), ["M", "N", "K"], pruner)
        gemm_call(autotuner, 512, 256, 1024)
        assert triton.knobs.autotuning.listener == tt._reporter.listen and heard[0][:3] == (512, 256, 1024)
    finally:
        tt._reporter._previous = saved
    assert tt.flush(10) and pruner.stats["reported"] == 2


def test_a_shortlist_written_here_prunes_through_tritons_autotuner_with_no_server(server, tmp_path):
    path = str(tmp_path / "shortlist.json")
    shapes = [(1024, 512, 2048, "bf16"), (2048, 1024, 512, "f32"), (1024, 512, 2048, "f16")]
    assert tt.write_shortlist(path, COLLECTION, shapes, kernel=matmul_kernel, address=server.address) == \
        {"problems": 2, "refused": 1}
    doc = json.load(open(path))
    assert doc["kernel"] == {"name": "matmul_kernel", "source_hash": tt.kernel_of(matmul_kernel).source_hash}
    assert [r["dtype"] for r in doc["refused"]] == ["f16"] and doc["refused"][0]["why"].startswith("FAILED_PRECONDITION")
    searched = tgraph.Client(server.address).search_tiles(COLLECTION, tt.gemm_module(1024, 512, 2048, "bf16"),
                                                          results=1000, kernel=tt.kernel_of(matmul_kernel))
    assert doc["problems"][0]["order"] == list(searched.tiles) and len(searched.tiles) > 200  # what compiles

    pruner = tt.Pruner(shortlist=path, address="127.0.0.1:1", top_k=3)  # nothing listens there
    assert pruner.collection == COLLECTION and pruner.report is False
    autotuner, _, benched = tuner(matmul_kernel, space_configs(), ["M", "N", "K"], pruner)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gemm_call(autotuner, 1024, 512, 2048)
        gemm_call(autotuner, 2048, 1024, 512, dtype="torch.float32")
        assert [name(c) for c in benched] == doc["problems"][0]["order"][:3] + doc["problems"][1]["order"][:3]
        assert pruner.stats["fallbacks"] == 0
        gemm_call(autotuner, 512, 512, 512)  # not in the file
        gemm_call(autotuner, 768, 512, 512)
    assert len(benched) == 6 + 2 * 288
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(said) == 1 and "bf16 512x512x512 is not in the shortlist" in said[0], said
    assert pruner.stats["shortlist_misses"] == 2 and pruner.stats["unanswered"] == 0


def test_a_shortlist_file_that_cannot_be_read_is_refused_naming_the_file_and_key(tmp_path):
    path = tmp_path / "s.json"
    good = {"format": "tgraph-triton-shortlist", "version": 1, "collection": COLLECTION, "kernel": None,
            "tile_space": {a: [1] for a in ("block_m", "block_n", "block_k", "num_warps", "num_stages")},
            "problems": [{"m": 8, "n": 8, "k": 8, "dtype": "bf16", "order": ["32x32x32 w4 s3"], "scores": [0.5]}]}
    path.write_text(json.dumps(good))
    assert tt.Pruner(shortlist=str(path)).collection == COLLECTION
    cases = [("{", "not JSON (line 1"),
             (dict(good, format="x"), '"format" is not "tgraph-triton-shortlist"'),
             (dict(good, version=2), '"version" 2, this client reads 1'),
             ({k: v for k, v in good.items() if k != "tile_space"}, '"tile_space" is missing or not a dict'),
             (dict(good, problems=[dict(good["problems"][0], order=["128x128"])]),
              "problems[0].order[0] is '128x128', not a tile configuration"),
             (dict(good, problems=[dict(good["problems"][0], k=0)]), "problems[0]: K is 0, not a size"),
             (dict(good, problems=[dict(good["problems"][0], scores=[])]),
              'problems[0] has 1 names in "order" and 0 "scores"')]
    for doc, said in cases:
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        with pytest.raises(tt.ShortlistError) as e:
            tt.Pruner(shortlist=str(path))
        assert str(path) in str(e.value) and said in str(e.value), str(e.value)
    with pytest.raises(ValueError, match="is of 'tile@h100-triton'"):
        path.write_text(json.dumps(good))
        tt.Pruner("tile@h200-triton", shortlist=str(path))
    with pytest.raises(tt.ShortlistError, match="No such file"):
        tt.Pruner(shortlist=str(tmp_path / "absent.json"))


def test_a_problem_whose_every_candidate_is_stored_is_run_at_its_measured_fastest_without_benchmarking(server):
    kernel = tt.kernel_of(matmul_kernel)
    module = tt.gemm_module(1536, 768, 1024, "bf16")
    client = tgraph.Client(server.address)
    legal = client.search_tiles(COLLECTION, module, results=1000, kernel=kernel).tiles
    assert client.search_tiles(COLLECTION, module, results=3, kernel=kernel).measured == {}
    fastest = legal[9]  # not among the model's first picks: the store, not the model, decides
    runtimes = [1000 + 10 * i for i in range(len(legal))]
    runtimes[9], runtimes[0] = runtimes[0], runtimes[9]
    client.report_measurements(COLLECTION, module, legal[:100], runtimes[:100], kernel=kernel)
    partly = tt.Pruner(COLLECTION, address=server.address, top_k=3, report=False)
    autotuner, _, benched = tuner(matmul_kernel, space_configs(), ["M", "N", "K"], partly)
    gemm_call(autotuner, 1536, 768, 1024)
    assert len(benched) == 3 and partly.stats["measured_once"] == 0  # some never measured: pruned as usual
    client.report_measurements(COLLECTION, module, legal[100:], runtimes[100:], kernel=kernel)
    assert client.search_tiles(COLLECTION, module, results=3, kernel=kernel).measured == dict(zip(legal, runtimes))

    pruner = tt.Pruner(COLLECTION, address=server.address, top_k=3, report=False)
    autotuner, launch, benched = tuner(matmul_kernel, space_configs(), ["M", "N", "K"], pruner)
    gemm_call(autotuner, 1536, 768, 1024)
    assert benched == [] and len(launch.launches) == 1 and name(autotuner.best_config) == fastest
    assert pruner.stats["measured_once"] == 1 and pruner.stats["searches"] == 1
    sure = tt.Pruner(COLLECTION, address=server.address, top_k=3, report=False, confirm=True)
    autotuner, _, benched = tuner(matmul_kernel, space_configs(), ["M", "N", "K"], sure)
    gemm_call(autotuner, 1536, 768, 1024)
    assert len(benched) == 3 and sure.stats["measured_once"] == 0


def test_the_pruned_list_of_a_key_is_the_same_in_every_process_while_the_store_does_not_change(server):
    """Triton's cache_results keys on the pruned list: a new process must prune alike."""
    kept = []
    for _ in range(3):
        pruner = tt.Pruner(COLLECTION, address=server.address, top_k=5, report=False)
        autotuner, _, benched = tuner(matmul_kernel, space_configs(), ["M", "N", "K"], pruner)
        gemm_call(autotuner, 3072, 1536, 768)
        kept.append([name(c) for c in pruner.last["kept"]])
    assert kept[0] == kept[1] == kept[2] and len(kept[0]) == 5


H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def real_timings(folder, csv_name, m, n, k, dtype="bf16"):
    """One problem's measured tile names and runtimes (ns) from a real timing file."""
    import csv
    names, runtimes = [], []
    with open(os.path.join(REAL, folder, csv_name)) as f:
        for row in csv.DictReader(f):
            if (row["dtype"], int(row["M"]), int(row["N"]), int(row["K"])) != (dtype, m, n, k):
                continue
            if row["block_m"] == "cublas" or row["ms"] in ("", "refused", "inf"):
                continue
            names.append(f"{row['block_m']}x{row['block_n']}x{row['block_k']} w{row['num_warps']} s{row['num_stages']}")
            runtimes.append(int(round(float(row["ms"]) * 1e6)))
    return names, runtimes


def test_h200_timings_never_reach_an_h100_search_and_an_h200_pruner_reports_nothing(server):
    client = tgraph.Client(server.address)
    module = tt.gemm_module(128, 1024, 1024, "bf16")
    nearby = tt.gemm_module(256, 1024, 1024, "bf16")
    on_h100 = tgraph.TileKernel("gpu_kernel", "ab" * 8, H100, "9.0")
    on_h200 = tgraph.TileKernel("gpu_kernel", "ab" * 8, H200, "9.0")
    h200 = real_timings("gpu-tiles-h200", "triton_gemm_h200.csv", 128, 1024, 1024)
    h100 = real_timings("gpu-tiles", "triton_gemm_h100.csv", 128, 1024, 1024)
    assert len(h200[0]) > 200 and len(h100[0]) > 200
    old = set(shards(server))
    before = len(old)
    # The H200's real timings of the problem, reported to the H100's collection: refused,
    # naming both GPUs; nothing written.
    with pytest.raises(tgraph.TgraphError) as refused:
        client.report_measurements(COLLECTION, module, *h200, kernel=on_h200)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert f"'{H200}'" in refused.value.message and f"'{H100}'" in refused.value.message
    with pytest.raises(tgraph.TgraphError) as wrong_capability:
        client.report_measurements(COLLECTION, module, *h100, kernel=tgraph.TileKernel("gpu_kernel", "ab" * 8, H100,
                                                                                       "8.0"))
    assert wrong_capability.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert len(shards(server)) == before
    # The H100's own: stored under the kernel on its GPU, and joined by the H100's searches
    # (naming the GPU or not), never by a search for the H200.
    client.report_measurements(COLLECTION, module, *h100, kernel=on_h100)
    (path,) = set(shards(server)) - old
    assert bytes(np.load(path)["tgraph_kernel"]).decode() == f"gpu_kernel@{'ab' * 8}/{H100}"
    assert client.search_tiles(COLLECTION, nearby, kernel=on_h100).kernel_problems == 1
    assert client.search_tiles(COLLECTION, nearby, kernel=tgraph.TileKernel("gpu_kernel", "ab" * 8)).kernel_problems == 1
    assert client.search_tiles(COLLECTION, nearby, kernel=on_h200).kernel_problems == 0
    assert client.search_tiles(COLLECTION, module, kernel=on_h200).measured == {}
    assert len(client.search_tiles(COLLECTION, module, kernel=on_h100).measured) == len(h100[0])
    # A pruner on an H200 asking the H100's model: pruned in its order, one warning naming
    # both GPUs, nothing reported.
    pruner = tt.Pruner(COLLECTION, address=server.address, top_k=3, gpu=H200)
    autotuner, _, benched = tuner(matmul_kernel, space_configs(), ["M", "N", "K"], pruner)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gemm_call(autotuner, 2048, 1024, 512)
        gemm_call(autotuner, 2048, 1024, 1024)
    said = [str(w.message) for w in caught if "tgraph.triton" in str(w.message)]
    assert len(said) == 1 and H200 in said[0] and H100 in said[0]
    assert len(benched) == 6 and pruner.other_gpu
    assert tt.flush(10) and pruner.stats["reported"] == 0 and len(shards(server)) == before + 1


def test_the_gpu_check_is_rehearsed_on_the_cpu_with_a_shortlist_written_here(server, tmp_path):
    """scripts/gpu-check-triton: the shortlist written against the server here, then the
    GPU step on its stand-in (Triton's autotuner for real, the launch and times made up)."""
    script = os.path.abspath(os.path.join(os.environ.get("TGRAPH_SOURCE_DIR", "."), "scripts", "gpu-check-triton"))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(tgraph.__file__))))
    run([sys.executable, script, "--prepare", str(tmp_path / "prep"), "--server", server.address], env=env)
    shortlist = json.load(open(tmp_path / "prep" / "shortlist.json"))
    assert len(shortlist["problems"]) == 24 and shortlist["gpu"] == H100
    run([sys.executable, script, "--shortlist", str(tmp_path / "prep" / "shortlist.json"), "--out",
         str(tmp_path / "out"), "--stand_in"], env=env)
    import tarfile
    import csv
    with tarfile.open(tmp_path / "out" / "gpu-check-triton.tar.gz") as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
        rows = list(csv.DictReader(io.TextIOWrapper(tar.extractfile("results.csv"))))
    assert manifest["problems_done"] == 24 and manifest["pruner"] == "tgraph.triton" and manifest["stand_in"]
    assert len(rows) == 24 * 2 * 3
    for r in rows:
        listed = next(p for p in shortlist["problems"] if (p["m"], p["n"], p["k"], p["dtype"]) ==
                      (int(r["M"]), int(r["N"]), int(r["K"]), r["dtype"]))
        if r["mode"] == "shortlist":
            assert int(r["benchmarked"]) == 3 and r["chosen"] in listed["order"][:3]
        else:  # Triton alone benchmarks every candidate that compiles and picks the fastest
            assert int(r["benchmarked"]) > 200 and float(r["chosen_ms"]) == float(r["fastest_ms"])
    # As on the GPU machine: no generated stubs (the checkout's client only), so the
    # file's top 3 are read directly, to the same candidates.
    bare = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    run([sys.executable, script, "--shortlist", str(tmp_path / "prep" / "shortlist.json"), "--out",
         str(tmp_path / "bare"), "--stand_in", "--repeats", "1"], env=bare, cwd=tmp_path)
    with tarfile.open(tmp_path / "bare" / "gpu-check-triton.tar.gz") as tar:
        again = list(csv.DictReader(io.TextIOWrapper(tar.extractfile("results.csv"))))
        assert json.load(tar.extractfile("manifest.json"))["pruner"].startswith("inline")
    first = {(r["dtype"], r["M"], r["N"], r["K"], r["mode"]): r["chosen"] for r in rows if r["repeat"] == "0"}
    assert {(r["dtype"], r["M"], r["N"], r["K"], r["mode"]): r["chosen"] for r in again} == first


def test_a_start_up_burst_of_64_new_keys_is_answered_on_the_default_flags_without_a_refusal(tile_server, tmp_path):
    """64 Pruners (8 processes of 8 threads) each ask at the same moment about a matrix
    product no other asked: the space, a registration and a tile search each, with the
    pruner's own 2 s deadline. Tile searches wait in a lane of their own (bounded by
    --tile_queue_size, 512 by default), so none is refused, none falls back to measuring
    every candidate; a layout search's queue of 16 refused most of such a burst."""
    import urllib.request
    from conftest import SRC
    s = Server(tile_server.registry, str(tmp_path))
    try:
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(tgraph.__file__))))
        r = run([sys.executable, os.path.join(SRC, "scripts", "tile-burst"), "--server", s.address, "--pruners", "64",
                 "--processes", "8", "--json"], env=env)
        burst = json.loads(r.stdout)
        assert burst["pruners"] == 64 and burst["fallbacks"] == 0, burst["why"]
        assert all(p["kept"] == 3 for p in burst["prunes"])  # the Pruner's top_k
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{s.metrics_port}/metrics", timeout=10).read().decode()
        assert "tgraph_rejected_queue_full_total 0" in metrics
        assert 'tgraph_requests_total{code="OK",method="SearchConfigs"} 64' in metrics
        assert 'tgraph_queue_wait_seconds_count{lane="tile"} 64' in metrics
    finally:
        s.stop()


def test_a_tile_report_on_a_layout_graph_or_of_a_runtime_over_an_hour_is_refused_and_nothing_is_written(server):
    """A matrix product registered as a layout graph (no kernel=True) is refused by a tile
    search; its tile report is refused alike, naming the registration. A runtime of
    2^63-1 ns (292 years) is not a measurement. Nothing of either is stored; the same
    timings on the kernel graph are."""
    client = tgraph.Client(server.address)
    kernel = tgraph.TileKernel("bounded_kernel", "cd" * 8)
    text = tt.gemm_module(192, 1024, 1024, "bf16").data
    as_layout = tgraph.HloModule(text)
    before = len(shards(server))
    with pytest.raises(tgraph.TgraphError) as search:
        client.search_tiles(COLLECTION, as_layout, results=3, kernel=kernel)
    with pytest.raises(tgraph.TgraphError) as report:
        client.report_measurements(COLLECTION, as_layout, ["64x64x32 w4 s3"], [12345], kernel=kernel)
    assert search.value.code == report.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "was registered as a layout graph" in report.value.message and "kernel=True" in report.value.message
    as_kernel = tgraph.HloModule(text, kernel=True)
    with pytest.raises(tgraph.TgraphError) as forever:
        client.report_measurements(COLLECTION, as_kernel, ["64x64x32 w4 s3", "64x64x32 w4 s4"],
                                   [12345, 2 ** 63 - 1], kernel=kernel)
    assert forever.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert forever.value.message.endswith("runtimes_ns[1]: 9223372036854775807 ns is over an hour "
                                          "(3600000000000 ns), not a measured runtime: are they ns?")
    assert len(shards(server)) == before
    assert client.report_measurements(COLLECTION, as_kernel, ["64x64x32 w4 s3"], [12345], kernel=kernel).stored == 1
    assert len(shards(server)) == before + 1


def test_what_a_new_kernel_problem_costs_the_server_is_what_its_byte_counters_say(tile_server, tmp_path):
    """Each new key a fleet asks about stays registered (the graph store) with its
    prepared tensors (the cache): the budgets bound RSS only if the counters say what an
    entry takes. 1,500 new problems, after 200 to warm up: the RSS they add is within 20%
    of what tgraph_registered_graph_bytes and tgraph_cache_bytes add (each tensor's
    fixed cost counted; without it the counters said 42% of it)."""
    import re
    import urllib.request
    s = Server(tile_server.registry, str(tmp_path))
    try:
        def rss():
            with open(f"/proc/{s.proc.pid}/status") as f:
                return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS"))

        def counted():
            text = urllib.request.urlopen(f"http://127.0.0.1:{s.metrics_port}/metrics", timeout=10).read().decode()
            return sum(float(v) for v in re.findall(r"^tgraph_(?:registered_graph|cache)_bytes (\S+)$", text, re.M))

        client = tgraph.Client(s.address)
        kernel = tgraph.TileKernel("memory_kernel", "ef" * 8)

        def ask(keys):
            for i in keys:
                client.search_tiles(COLLECTION, tt.gemm_module(16 * (1 + i % 97), 16 * (1 + i // 97), 512, "bf16"),
                                    results=3, kernel=kernel)
        ask(range(200))
        rss0, counted0 = rss(), counted()
        ask(range(200, 1700))
        grew, said = rss() - rss0, counted() - counted0
        assert said > 0 and 0.8 <= grew / said <= 1.2, (grew / 1500, said / 1500)
    finally:
        s.stop()


def test_a_fleet_soak_with_kills_loses_no_acknowledged_report_and_stores_none_twice(tile_server, tmp_path):
    """scripts/tile-burst --soak_s, short: 8 pruners in 2 processes prune new keys and
    report what they kept while the server is killed (SIGKILL) and started again. Every
    acknowledged report is in the store with its runtimes, every shard is one report's
    (named by exactly one report marker), no temporary stays after the last start."""
    from conftest import BIN, SRC
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(tgraph.__file__))))
    r = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "tile-burst"), "--soak_s", "14", "--kill_every_s",
                        "5", "--pruners", "8", "--processes", "2", "--registry", tile_server.registry, "--store",
                        str(tmp_path / "store"), "--bin_dir", BIN, "--json"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    soak = json.loads(r.stdout)
    assert soak["kills"] >= 2 and soak["prunes"] > 50
    assert soak["reports_acknowledged"] > 50 and soak["lost"] == 0
    assert soak["named_twice"] == 0 and soak["unnamed_shards"] == 0 and soak["temporaries"] == 0
    assert soak["shards"] >= soak["reports_acknowledged"]
