"""Data-parallel training (tgraph-train --world_size N, c10d's Gloo backend over
loopback): N ranks train the weights one rank trains with the same --graphs_per_step,
a rank that dies fails the job without publishing, and a restart resumes from the
checkpoint with any number of ranks. Run by ctest (distributed_training) with pytest."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.environ.get("TGRAPH_SOURCE_DIR", "."), "client", "python", "tests"))
from conftest import binary  # noqa: E402

COLLECTION = "layout:xla:random"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    subprocess.run([binary("model", "synth", "tgraph-synth"), "--out", str(out), "--preset", "ci", "--seed", "2",
                    "--collections", COLLECTION, "--max_graphs_per_split", "10"], check=True, capture_output=True)
    return out


def train_args(data, run_dir, epochs, *extra):
    return [binary("model", "train", "tgraph-train"), "--data", str(data), "--collection", COLLECTION,
            "--run_dir", str(run_dir), "--profile", "quick", "--hidden", "32", "--folds", "4", "--train_folds", "1",
            "--keep_folds", "1", "--epochs", str(epochs), "--threads", "1", "--seed", "3", "--progress=false",
            "--graphs_per_step", "2", *map(str, extra)]


def ranks(data, run_dir, epochs, world, *extra):
    """Starts `world` ranks on loopback; returns the processes, rank 0 first."""
    port = free_port()
    return [subprocess.Popen(train_args(data, run_dir, epochs, "--world_size", world, "--rank", r, "--master_port",
                                        port, "--gloo_interface", "lo", *extra),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r in range(world)]


def finish(procs, timeout=300):
    return [(p.wait(timeout=timeout), *p.communicate()) for p in procs]


def test_two_ranks_train_the_weights_one_rank_trains_with_the_same_graphs_per_step(data, tmp_path):
    one = subprocess.run(train_args(data, tmp_path / "one", 3, "--fold", 0), capture_output=True, text=True,
                         timeout=300)
    assert one.returncode == 0, one.stderr
    results = finish(ranks(data, tmp_path / "two", 3, 2, "--fold", 0))
    for rc, out, err in results:
        assert rc == 0, err
    assert "rank 1 of 2; rank 0 writes the fold's files" in results[1][1]
    # The same weights to the bit: the same graphs per step, gradients summed exactly.
    for name in ("best.npz", "state.json", "result.json"):
        assert (tmp_path / "two" / "fold_0" / name).exists()
    assert (tmp_path / "one" / "fold_0" / "best.npz").read_bytes() == \
           (tmp_path / "two" / "fold_0" / "best.npz").read_bytes()
    ckpt = [f for f in os.listdir(tmp_path / "one" / "fold_0") if f.endswith(".npz") and f.startswith("ckpt_")]
    assert len(ckpt) == 1
    assert (tmp_path / "one" / "fold_0" / ckpt[0]).read_bytes() == (tmp_path / "two" / "fold_0" / ckpt[0]).read_bytes()


def test_a_killed_rank_fails_the_job_without_publishing_and_a_restart_on_one_rank_resumes(data, tmp_path):
    registry = tmp_path / "registry"
    run = tmp_path / "run"
    procs = ranks(data, run, 40, 2, "--registry", registry)
    state = run / "fold_0" / "state.json"
    deadline = time.time() + 240
    while not state.exists() and time.time() < deadline and procs[0].poll() is None:
        time.sleep(0.05)
    assert state.exists(), procs[0].communicate()[1]
    procs[1].kill()  # mid-epoch: the first checkpoint was written at the end of epoch 1
    rc, out, err = finish(procs[:1])[0]
    procs[1].wait()
    assert rc == 1
    assert "rank 0 of 2: all-reduce failed: another rank exited or did not answer" in err, err
    assert not (run / "fold_0" / "result.json").exists()
    assert not registry.exists() or not any(registry.rglob("manifest.json"))  # nothing published
    stopped_at = json.loads(state.read_text())["step"]
    assert stopped_at > 0
    # A restart (here on one rank, the same graphs per step) resumes from the checkpoint
    # and ends where an uninterrupted run does.
    resumed = subprocess.run(train_args(data, run, 40, "--registry", registry), capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    log = [json.loads(line) for line in (run / "fold_0" / "log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log] == sorted({e["step"] for e in log})  # continued, nothing trained twice
    assert log[0]["step"] <= stopped_at < log[-1]["step"]
    assert "published" in resumed.stdout
    whole = subprocess.run(train_args(data, tmp_path / "whole", 40, "--fold", 0), capture_output=True, text=True,
                           timeout=600)
    assert whole.returncode == 0, whole.stderr
    assert (run / "fold_0" / "best.npz").read_bytes() == (tmp_path / "whole" / "fold_0" / "best.npz").read_bytes()


def test_a_rank_alone_at_the_rendezvous_fails_naming_the_address(data, tmp_path):
    port = free_port()
    r = subprocess.run(train_args(data, tmp_path / "run", 1, "--world_size", 2, "--rank", 1, "--master_port", port,
                                  "--dist_timeout_s", 2), capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert f"rendezvous at 127.0.0.1:{port} (rank 1 of 2)" in r.stderr, r.stderr


def test_rank_and_world_size_come_from_the_environment_and_are_checked(data, tmp_path):
    env = dict(os.environ, WORLD_SIZE="2", RANK="2")
    r = subprocess.run(train_args(data, tmp_path / "run", 1), capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2
    assert "--rank 2 is outside 0..1 (--world_size 2)" in r.stderr
    env = dict(os.environ, WORLD_SIZE="two")
    r = subprocess.run(train_args(data, tmp_path / "run", 1), capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2
    assert "WORLD_SIZE='two': expected an integer" in r.stderr
