"""Fixtures: the project's binaries, the real TpuGraphs files, a tiny trained registry
and tgraph-server processes on loopback. ctest sets TGRAPH_BIN_DIR and
TGRAPH_SOURCE_DIR (tests/CMakeLists.txt); by hand:

    TGRAPH_BIN_DIR=build TGRAPH_SOURCE_DIR=. PYTHONPATH=build/client/python \\
        python3 -m pytest client/python/tests
"""
import glob
import os
import signal
import socket
import subprocess
import time

import pytest

BIN = os.path.abspath(os.environ.get("TGRAPH_BIN_DIR", "build"))
SRC = os.path.abspath(os.environ.get("TGRAPH_SOURCE_DIR", "."))
REAL = os.path.join(SRC, "tests", "data", "real")


def pytest_configure(config):
    config.addinivalue_line("markers", "debian_python: builds with the system Python's packages (Debian's "
                            "setuptools and grpc_tools); tests/other_python_test.py deselects it")


def binary(*parts):
    path = os.path.join(BIN, *parts)
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: build the project first (TGRAPH_BIN_DIR={BIN})")
    return path


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}"
    return r


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """tgraph-server on loopback; `port` 0 picks a free one."""

    def __init__(self, registry, tmp, port=0, extra=()):
        self.registry, self.tmp, self.extra = registry, tmp, list(extra)
        self.chosen = port == 0  # a port picked here may be taken by another test before the server binds it
        self.port = port or free_port()
        self.start()

    def start(self):
        for attempt in range(3):
            port_file = os.path.join(self.tmp, f"ports.{self.port}")
            if os.path.exists(port_file):
                os.remove(port_file)
            self.log = open(os.path.join(self.tmp, f"server.{self.port}.log"), "a")
            self.proc = subprocess.Popen(
                [binary("server", "tgraph-server"), f"--registry={self.registry}", f"--address=127.0.0.1:{self.port}",
                 "--metrics_address=127.0.0.1:0", f"--port_file={port_file}", "--poll_interval_s=0.5",
                 "--intra_op_threads=1", *self.extra], stdout=self.log, stderr=subprocess.STDOUT)
            for _ in range(1200):
                if os.path.exists(port_file) or self.proc.poll() is not None:
                    break
                time.sleep(0.05)
            if os.path.exists(port_file):
                break
            said = open(self.log.name).read()[-2000:]
            if not (self.chosen and self.proc.poll() is not None and "already in use" in said.lower()):
                raise AssertionError(f"tgraph-server did not start: {self.log.name}:\n{said}")
            self.port = free_port()
        self.metrics_port = int(open(port_file).read().split()[1])

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


@pytest.fixture(scope="session")
def world(tmp_path_factory):
    """Synthetic tiny data, and a registry with one small model per collection kind
    (one epoch each: what is tested is the client, not the model's quality)."""
    tmp = str(tmp_path_factory.mktemp("world"))
    data, registry = os.path.join(tmp, "data"), os.path.join(tmp, "registry")
    run([binary("model", "synth", "tgraph-synth"), "--out", data, "--preset", "tiny", "--seed", "3",
         "--collections", "layout:xla:random,tile:xla"])
    for collection in ("layout:xla:random", "tile:xla"):
        run([binary("model", "train", "tgraph-train"), "--data", data, "--collection", collection, "--run_dir",
             os.path.join(tmp, "run-" + collection.replace(":", "_")), "--registry", registry, "--profile", "quick",
             "--folds", "2", "--train_folds", "1", "--keep_folds", "1", "--epochs", "1", "--hidden", "16",
             "--threads", "1", "--progress=false"])
    return {"tmp": tmp, "data": data, "registry": registry}


@pytest.fixture(scope="session")
def server(world):
    s = Server(world["registry"], world["tmp"], extra=["--measurement_store", os.path.join(world["tmp"], "store")])
    yield s
    s.stop()


@pytest.fixture(scope="session")
def tile_server(tmp_path_factory):
    """The real H100 tile measurements ingested (tile@h100-triton, split seed 0) and a
    small tile model trained on them (one epoch: its prior is what the tests read), served."""
    tmp = str(tmp_path_factory.mktemp("tiles"))
    tiles = os.path.join(REAL, "gpu-tiles")
    data, registry = os.path.join(tmp, "data"), os.path.join(tmp, "registry")
    run([binary("model", "hlo", "tgraph-featurize"), "tiles", "--csv", os.path.join(tiles, "triton_gemm_h100.csv"),
         "--hlo_dir", os.path.join(tiles, "hlo"), "--out_root", data])
    run([binary("model", "train", "tgraph-train"), "--data", data, "--collection", "tile@h100-triton", "--run_dir",
         os.path.join(tmp, "run"), "--registry", registry, "--profile", "quick", "--folds", "2", "--train_folds", "1",
         "--keep_folds", "1", "--epochs", "1", "--hidden", "16", "--threads", "1", "--progress=false"])
    s = Server(registry, tmp)
    s.data = data
    yield s
    s.stop()


def real_files():
    return sorted(glob.glob(os.path.join(REAL, "npz", "**", "*.npz"), recursive=True))
