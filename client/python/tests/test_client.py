"""The Python client against a real tgraph-server on loopback (and, for the wire
contract alone, against a recording stand-in server)."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc
import numpy as np
import pytest

import tgraph
from tgraph.hlo import tuning_pb2
from tgraph.v1 import ranker_pb2, ranker_pb2_grpc

from conftest import REAL, SRC, Server, binary, real_files, run

UNET = os.path.join(REAL, "npz", "layout", "xla", "random", "valid", "unet_3d.4x4.bf16.npz")
UNET_DEFAULT = os.path.join(REAL, "npz", "layout", "xla", "default", "valid", "unet_3d.4x4.bf16.npz")


def cpp_hash(server, path):
    """The C++ client's hash of a file (tgraph-client register checks it against the server's)."""
    out = run([binary("client", "tgraph-client"), "register", "--server", server.address, "--npz", path]).stdout
    return re.match(r"graph ([0-9a-f]{64}):", out).group(1)


def test_content_hash_equals_the_cpp_clients_and_the_servers_on_real_and_synthetic_files(server, world):
    files = real_files() + sorted(glob.glob(os.path.join(world["data"], "npz", "**", "*.npz"), recursive=True))[:6]
    assert len(real_files()) == 14
    client = tgraph.Client(server.address)
    for path in files:
        g = tgraph.load_graph(path)
        assert client.register(g).graph_hash == g.content_hash, path
        assert cpp_hash(server, path) == g.content_hash, path


def test_hash_canonicalises_negative_zero_and_depends_on_every_array():
    g = tgraph.load_graph(UNET)
    feat = g.node_feat.copy()
    zero = np.argwhere(feat == 0)[0]
    feat[tuple(zero)] = -0.0
    assert tgraph.Graph(feat, g.node_opcode, g.edge_index, g.node_config_ids).content_hash == g.content_hash
    feat[tuple(zero)] = 1.0
    assert tgraph.Graph(feat, g.node_opcode, g.edge_index, g.node_config_ids).content_hash != g.content_hash
    ids = g.node_config_ids.copy()
    ids[0] += 1
    assert tgraph.Graph(g.node_feat, g.node_opcode, g.edge_index, ids).content_hash != g.content_hash


def test_rank_a_real_graph_in_a_few_lines(server):
    with tgraph.Client(server.address) as client:
        ranking = client.rank("layout:xla:random", UNET, top_k=5)
    g = tgraph.load_graph(UNET)
    assert ranking.scores.shape == (g.configs.shape[0],) == (481,)
    assert ranking.spread.shape == (481,)
    assert list(ranking.order) == list(np.argsort(ranking.scores, kind="stable")[:5])
    assert ranking.model_version == 1


def test_scores_keep_across_row_orders_and_across_calls_with_one_reference(server):
    g = tgraph.load_graph(UNET)
    with tgraph.Client(server.address) as client:
        forward = client.rank("layout:xla:random", UNET)
        backward = client.rank("layout:xla:random", g, g.configs[::-1])
        assert forward.reference_configs == 256  # the model's reference, chosen from the 481 rows
        assert np.array_equal(backward.scores[::-1], forward.scores)
        # With the caller's reference, a part of the rows scores as the whole did.
        reference = g.configs[:20]
        whole = client.rank("layout:xla:random", g, g.configs, reference=reference)
        part = client.rank("layout:xla:random", g, g.configs[100:200], reference=reference)
        distinct = len(np.unique(reference.reshape(len(reference), -1), axis=0))  # the file repeats a row
        assert whole.reference_configs == part.reference_configs == distinct == 19
        np.testing.assert_allclose(part.scores, whole.scores[100:200], atol=1e-5)
        assert {m.collection: m for m in client.models()}["layout:xla:random"].reference_configs == 256


def test_registration_is_transparent_and_survives_a_server_restart(world):
    s = Server(world["registry"], world["tmp"])
    client = tgraph.Client(s.address)
    g = tgraph.load_graph(UNET)
    first = client.rank("layout:xla:random", g, g.configs[:40])
    assert first.registrations == 1
    second = client.rank("layout:xla:random", g, g.configs[:40])
    assert second.registrations == 0 and second.timing["cache_hit"]
    np.testing.assert_array_equal(first.scores, second.scores)
    # The request goes out while nothing listens; the server is back 2 s later (a restart
    # takes over a second) and has forgotten the graph: the client rides over both.
    s.stop()
    restart = threading.Timer(2.0, s.start)
    restart.start()
    third = client.rank("layout:xla:random", g, g.configs[:40])
    restart.join()
    assert third.registrations == 1
    np.testing.assert_array_equal(first.scores, third.scores)
    assert s.stop() == 0


def test_tile_graphs_rank_with_their_own_configurations(server):
    path = sorted(glob.glob(os.path.join(REAL, "npz", "tile", "xla", "test", "*.npz")))[0]
    g = tgraph.load_graph(path)
    r = tgraph.Client(server.address).rank("tile:xla", path, top_k=3)
    assert r.scores.shape == (g.configs.shape[0],)
    assert len(r.order) == 3


def test_an_hlo_module_registers_lists_its_nodes_and_ranks(server):
    data = tuning_pb2.ModuleTuningData.FromString(open(os.path.join(REAL, "module_tuning_data_layout.pb"), "rb").read())
    module = tgraph.HloModule(data.module.SerializeToString(), "unet3d")
    client = tgraph.Client(server.address)
    npz = tgraph.load_graph(UNET_DEFAULT)
    r = client.rank("layout:xla:random", module, npz.configs[:30], top_k=3)
    assert r.registrations == 1
    reg = client.register(module)
    # The real file's graph with its nodes in the canonical order (docs/api.md): another
    # hash, the same configurable nodes in the file's row order, so its rows rank the same.
    assert reg.graph_hash != npz.content_hash
    assert reg.num_nodes == npz.num_nodes
    assert len(reg.configurable_nodes) == 62
    assert reg.configurable_nodes[0].instruction and reg.configurable_nodes[0].computation
    module_opcodes = [n.opcode for n in reg.configurable_nodes]
    npz_opcodes = [client.register(npz).configurable_nodes[j].opcode for j in range(1)]
    assert module_opcodes[0] == npz_opcodes[0] == "reshape"
    np.testing.assert_allclose(client.rank("layout:xla:random", UNET_DEFAULT, npz.configs[:30]).scores, r.scores,
                               atol=1e-3)


def test_files_are_told_apart_by_content_not_name(server, tmp_path):
    """HLO text (the real graphsage_tf.hlo), an HLO proto and an npz, each under a
    misleading name: the client reads each as what it is."""
    client = tgraph.Client(server.address)
    text = os.path.join(REAL, "hlo", "graphsage_tf.hlo")
    reg = client.register(text)
    assert len(reg.configurable_nodes) == 27 and reg.configurable_nodes[0].instruction == "shape.22"
    as_npz_name = tmp_path / "graphsage.npz"  # text named .npz
    shutil.copy(text, as_npz_name)
    assert client.register(str(as_npz_name)).graph_hash == reg.graph_hash
    npz_named_pb = tmp_path / "unet.pb"  # an npz named .pb
    shutil.copy(UNET_DEFAULT, npz_named_pb)
    npz = tgraph.load_graph(UNET_DEFAULT)
    assert client.register(str(npz_named_pb)).graph_hash == npz.content_hash
    data = tuning_pb2.ModuleTuningData.FromString(open(os.path.join(REAL, "module_tuning_data_layout.pb"), "rb").read())
    proto_named_hlo = tmp_path / "unet.hlo"  # an HLO proto named .hlo
    proto_named_hlo.write_bytes(data.module.SerializeToString())
    as_module = client.register(tgraph.HloModule(data.module.SerializeToString()))
    assert client.register(str(proto_named_hlo)).graph_hash == as_module.graph_hash
    assert len(as_module.configurable_nodes) == npz.num_config_nodes
    rows = client.search("layout:xla:random", text, results=2, max_evaluations=100).configs
    assert client.rank("layout:xla:random", text, rows).scores.shape == (2,)


def test_the_layout_space_builds_legal_rows_and_the_server_refuses_illegal_ones(server):
    """RegisterGraph's layout search space (docs/api.md): the real file's rows use it;
    Registration.layout_row builds rows by instruction name or node index, refusing what
    the server would refuse; an illegal row sent anyway is INVALID_ARGUMENT naming it."""
    data = tuning_pb2.ModuleTuningData.FromString(open(os.path.join(REAL, "module_tuning_data_layout.pb"), "rb").read())
    module = tgraph.HloModule(data.module.SerializeToString(), "unet3d")
    client = tgraph.Client(server.address)
    npz = tgraph.load_graph(UNET_DEFAULT)
    reg = client.register(module)
    conv = reg.configurable_nodes[5]
    assert conv.opcode == "convolution" and [g.name for g in conv.groups] == ["output", "input", "kernel"]
    assert conv.groups[1].rank == 5
    np.testing.assert_array_equal(conv.groups[1].candidates, [[-1] * 6, [0, 4, -1, -1, -1, -1], [4, 0, -1, -1, -1, -1]])
    # Every group of every row of the real file is legal for its rank.
    for j, node in enumerate(reg.configurable_nodes):
        for g, group in enumerate(node.groups):
            values = npz.configs[:, j, 6 * g:6 * g + 6]
            assert (values < max(group.rank, 0)).all()
    row = reg.layout_row({conv.instruction: [[4, 0], [0, 4], [3, 4]]})
    assert row.shape == (62, 18) and row.dtype == np.int8
    np.testing.assert_array_equal(row[5], [4, 0, -1, -1, -1, -1, 0, 4, -1, -1, -1, -1, 3, 4, -1, -1, -1, -1])
    assert (np.delete(row, 5, axis=0) == -1).all()
    np.testing.assert_array_equal(reg.layout_row({conv.node: [[4, 0]]})[5, :6], [4, 0, -1, -1, -1, -1])
    client.rank("layout:xla:random", module, row[None])  # legal: ranked
    for layouts, message in [({conv.instruction: [[4, 4]]}, "output group [4, 4]: dimension 4 appears twice"),
                             ({conv.instruction: [[], [5]]}, "input group [5]: dimension 5 is not a dimension of the "
                                                             "rank-5 tensor (expected 0..4)"),
                             ({"no_such_instruction": [[0]]}, "is not a configurable node")]:
        with pytest.raises(tgraph.TgraphError) as e:
            reg.layout_row(layouts)
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and message in str(e.value), str(e.value)
    bad = row.copy()
    bad[5, 0:2] = 4
    with pytest.raises(tgraph.TgraphError) as e:
        client.rank("layout:xla:random", module, bad[None])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert f"layout_configs: config 0, configurable node 5 (convolution '{conv.instruction}', node" in str(e.value)
    assert "output group [4, 4, -1, -1, -1, -1]: dimension 4 appears twice" in str(e.value)


def test_search_proposes_legal_new_rows_best_first_the_same_for_a_seed(server):
    """SearchConfigs from Python on the real unet_3d graph: the file's rows excluded as
    measured, its fastest ones the start; the proposals are legal (the server ranks them),
    new, distinct, best first and the same again for the seed."""
    client = tgraph.Client(server.address)
    g = tgraph.load_graph(UNET)
    best = g.configs[np.argsort(g.runtimes, kind="stable")[:8]]
    p = client.search("layout:xla:random", g, results=5, max_evaluations=300, exclude=g.configs, start=best, seed=3)
    assert p.configs.shape == (5, 62, 18) and p.configs.dtype == np.int8
    assert list(p.scores) == sorted(p.scores) and (p.spread >= 0).all()
    assert 0 < p.evaluations <= 300 and p.reference_configs > 0
    measured = {r.tobytes() for r in g.configs}
    assert all(r.tobytes() not in measured for r in p.configs) and len({r.tobytes() for r in p.configs}) == 5
    again = client.search("layout:xla:random", g, results=5, max_evaluations=300, exclude=g.configs, start=best, seed=3)
    np.testing.assert_array_equal(again.configs, p.configs)
    assert client.rank("layout:xla:random", g, p.configs).scores.shape == (5,)
    # The trust region: by default at most 8 groups changed from the default or a start row;
    # a radius of 2 holds every proposal within 2 of the nearest; -1 lifts it.
    def nearest(row):
        anchors = np.concatenate([np.full((1, 62, 18), -1, np.int8), best])
        groups = (anchors.reshape(len(anchors), -1, 6) != row.reshape(1, -1, 6)).any(axis=2)
        return groups.sum(axis=1).min()
    assert p.max_changed_groups == 8 and all(nearest(r) <= 8 for r in p.configs)
    tight = client.search("layout:xla:random", g, results=5, max_evaluations=300, exclude=g.configs, start=best, seed=3,
                          max_changed_groups=2)
    assert tight.max_changed_groups == 2 and all(nearest(r) <= 2 for r in tight.configs)
    assert client.search("layout:xla:random", g, results=5, max_evaluations=300, exclude=g.configs, start=best,
                         seed=3, max_changed_groups=-1).max_changed_groups == 0
    with pytest.raises(tgraph.TgraphError) as e:
        client.search("tile:xla", g)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    # Within the file's rows (candidates), its 10 fastest measured: only the others return.
    pool = client.search("layout:xla:random", g, results=5, max_evaluations=300, exclude=best, start=best,
                         candidates=g.configs, seed=3)
    rows = {r.tobytes() for r in g.configs} - {r.tobytes() for r in best}
    assert pool.configs.shape == (5, 62, 18) and all(r.tobytes() in rows for r in pool.configs)
    # With the measured rows' runtimes, the search also follows them; the server says so.
    assert p.correction_measurements == 0
    learned = client.search("layout:xla:random", g, results=5, max_evaluations=300, exclude=g.configs, start=best,
                            seed=3, exclude_runtimes_ns=g.runtimes)
    assert learned.correction_measurements == 481 and p.num_variation == 0
    assert p.correction_weight == 0 and 0 <= learned.correction_weight <= 3
    assert all(r.tobytes() not in measured for r in learned.configs)
    # In the file's order the last 30 runtimes are no faster than the best before them: a
    # stalled loop, so 3 of the 5 are variation after the model's 2 picks. With the last
    # measurement twice as fast as any, it is improving: the model's 5, best first.
    assert learned.num_variation == 3 and learned.scores[0] <= learned.scores[1]
    faster = g.runtimes.copy()
    faster[-1] = faster.min() // 2
    improving = client.search("layout:xla:random", g, results=5, max_evaluations=300, exclude=g.configs, start=best,
                              seed=3, exclude_runtimes_ns=faster)
    assert improving.num_variation == 0 and list(improving.scores) == sorted(improving.scores)
    with pytest.raises(tgraph.TgraphError) as e:
        client.search("layout:xla:random", g, exclude=g.configs, exclude_runtimes_ns=g.runtimes[:3])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "exclude_runtimes_ns" in str(e.value)


def test_a_tile_kernels_search_scores_its_legal_space_and_follows_the_runtimes_measured_so_far(tile_server):
    client = tgraph.Client(tile_server.address)
    info = {m.collection: m for m in client.models()}["tile@h100-triton"]
    assert json.loads(info.tile_space)["dtypes"] == ["bf16", "f32"]
    # The prior of the 60 problems it trained on (the 12 of the test split held out).
    assert info.tile_prior is not None and info.tile_prior.problems == 60 and info.tile_prior.weight == 1.0
    path = os.path.join(tile_server.data, "npz", "tile", "@h100-triton", "test", "gemm_bf16_2048x256x1024.npz")
    pool = tgraph.load_graph(path)
    first = client.search_tiles("tile@h100-triton", path, results=5)
    assert len(first.tiles) == 5 and first.configs.shape == (5, 24) and first.scores.shape == (5,)
    assert first.evaluations == 260 and first.correction_measurements == 0  # every legal bf16 configuration
    assert list(first.scores) == sorted(first.scores)
    # The first three measured (their runtimes from the file's pool): the next search
    # leaves them out and its prior follows them.
    at = [int(np.flatnonzero((pool.configs == row).all(axis=1))[0]) for row in first.configs[:3]]
    nxt = client.search_tiles("tile@h100-triton", path, results=5, exclude=first.configs[:3],
                              exclude_runtimes_ns=pool.runtimes[at])
    assert nxt.correction_measurements == 3 and nxt.evaluations == 257
    assert not set(nxt.tiles) & set(first.tiles[:3])
    without = client.search_tiles("tile@h100-triton", path, results=5, exclude=first.configs[:3])
    assert without.correction_measurements == 0 and without.evaluations == 257
    with pytest.raises(tgraph.TgraphError) as e:
        client.search_tiles("tile@h100-triton", path, exclude=first.configs[:3], exclude_runtimes_ns=[100, 200])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "2 runtimes for 3 excluded rows" in str(e.value)
    with pytest.raises(tgraph.TgraphError) as e:
        client.search_tiles("layout:xla:random", path)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "give a tile collection" in str(e.value)
    # client/python/examples/tile_loop.py: one measurement a round until one is within 1%
    # of the fastest, the prior following every measurement from the second on.
    r = run([sys.executable, os.path.join(SRC, "client", "python", "examples", "tile_loop.py"), tile_server.address,
             path])
    lines = r.stdout.splitlines()
    assert re.search(r"x the fastest \(the prior followed 0 measurements\)$", lines[0])
    assert all(f"(the prior followed {i} measurements)" in line for i, line in enumerate(lines) if i >= 2)
    ns = [int(re.search(r" (\d+) ns,", line).group(1)) for line in lines]
    fastest = int(pool.runtimes.min())
    assert ns[-1] <= 1.01 * fastest and all(t > 1.01 * fastest for t in ns[:-1])


def test_a_kernels_hlo_registered_as_one_kernel_is_the_tile_graph_its_npz_holds(tile_server):
    """A Triton user has the problem, not an npz: its HLO as HloModule(kernel=True) is the
    graph tgraph-featurize tiles wrote for it (one hash), and searches alike; without
    kernel=True it is a layout graph, which the tile search refuses."""
    client = tgraph.Client(tile_server.address)
    hlo = os.path.join(REAL, "gpu-tiles", "hlo", "gemm_bf16_2048x256x1024.hlo")
    npz = os.path.join(tile_server.data, "npz", "tile", "@h100-triton", "test", "gemm_bf16_2048x256x1024.npz")
    kernel = tgraph.HloModule.from_file(hlo, kernel=True)
    reg = client.register(kernel)
    assert reg.graph_hash == tgraph.load_graph(npz).content_hash and reg.configurable_nodes == []
    from_hlo = client.search_tiles("tile@h100-triton", kernel, results=5)
    from_npz = client.search_tiles("tile@h100-triton", npz, results=5)
    assert from_hlo.evaluations == 260 and len(from_hlo.tiles) == 5
    assert from_hlo.tiles == from_npz.tiles and np.array_equal(from_hlo.scores, from_npz.scores)
    layout = tgraph.HloModule.from_file(hlo)
    assert layout.digest != kernel.digest
    with pytest.raises(tgraph.TgraphError) as e:
        client.search_tiles("tile@h100-triton", layout)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_report_measurements_stores_a_shard(server, world):
    g = tgraph.load_graph(UNET)
    receipt = tgraph.Client(server.address).report_measurements("layout:xla:random", g, g.configs[:7],
                                                                g.runtimes[:7], source="pytest")
    assert receipt.stored == 7
    shard = os.path.join(world["tmp"], "store", receipt.shard)
    with np.load(shard) as z:
        np.testing.assert_array_equal(z["config_runtime"], g.runtimes[:7])


def test_a_search_joins_what_the_store_holds_of_its_graph_and_says_how_many(server, world):
    """report_measurements, then search(include_stored=True) without sending them back:
    none is proposed again, their runtimes correct the scores, stored_measurements says
    how many joined; rows given as well count once; without include_stored, none join."""
    client = tgraph.Client(server.address)
    valid = os.path.join(world["data"], "npz", "layout", "xla", "random", "valid")
    g = tgraph.load_graph(os.path.join(valid, sorted(os.listdir(valid))[0]))  # a graph no other test reports
    _, first = np.unique(g.configs.reshape(len(g.configs), -1), axis=0, return_index=True)
    rows = g.configs[np.sort(first)[:6]]  # six distinct rows (a random file repeats some)
    runtimes = g.runtimes[np.sort(first)[:6]]
    client.report_measurements("layout:xla:random", g, rows, runtimes)
    p = client.search("layout:xla:random", g, results=4, max_evaluations=200, seed=1, include_stored=True)
    assert (p.stored_measurements, p.correction_measurements, p.start_configs) == (6, 6, 6)
    measured = {r.tobytes() for r in rows}
    assert p.configs.shape[0] == 4 and not {r.tobytes() for r in p.configs} & measured
    given = client.search("layout:xla:random", g, results=4, max_evaluations=200, seed=1, exclude=rows[:2],
                          include_stored=True)
    assert (given.stored_measurements, given.correction_measurements) == (4, 6)
    alone = client.search("layout:xla:random", g, results=4, max_evaluations=200, seed=1)
    assert (alone.stored_measurements, alone.correction_measurements, alone.start_configs) == (0, 0, 0)


def test_a_report_sent_again_with_its_id_is_stored_once_and_said_so(server, world):
    """What the client's retry after a lost answer sends: the same request, its report_id
    included. The second call writes nothing and names the first's shard."""
    g = tgraph.load_graph(UNET)
    client = tgraph.Client(server.address)
    client.register(g)
    request = ranker_pb2.ReportMeasurementsRequest(
        collection="layout:xla:random", graph_hash=g.content_hash, num_configs=3,
        layout_configs=np.ascontiguousarray(g.configs[:3], np.int8).tobytes(), runtimes_ns=[int(x) for x in g.runtimes[:3]],
        source="pytest", report_id="0f" * 16)
    stub = ranker_pb2_grpc.RankerStub(grpc.insecure_channel(server.address))
    train = os.path.join(world["tmp"], "store", "npz", "layout", "xla", "random", "train")
    before = len(os.listdir(train))
    first, again = stub.ReportMeasurements(request, timeout=30), stub.ReportMeasurements(request, timeout=30)
    assert (first.stored, first.already_stored) == (3, False)
    assert (again.stored, again.shard, again.already_stored) == (3, first.shard, True)
    assert len(os.listdir(train)) == before + 1
    # The client's own reports carry a fresh id each: two reports of the same rows, two shards.
    receipts = [client.report_measurements("layout:xla:random", g, g.configs[:3], g.runtimes[:3]) for _ in range(2)]
    assert receipts[0].shard != receipts[1].shard and not any(r.already_stored for r in receipts)


def test_health_and_models(server):
    client = tgraph.Client(server.address)
    assert client.health() == "SERVING"
    assert client.health("liveness") == "SERVING"
    models = {m.collection: m for m in client.models()}
    assert set(models) == {"layout:xla:random", "tile:xla"}
    assert models["layout:xla:random"].version == 1 and models["layout:xla:random"].hidden == 16
    # Trained by tgraph-train on tgraph-synth's data: it says so.
    p = models["layout:xla:random"].provenance
    assert p.data == "synthetic" and p.synthetic_only and p.graphs > 0 and p.configurations > 0
    assert p.dataset.startswith("Synthetic TpuGraphs-format data generated by tgraph-synth (preset tiny, seed 3)")
    assert p.summary.startswith("synthetic data only (") and len(p.data_fingerprint) == 64


def test_errors_are_one_exception_type_with_the_grpc_code(server):
    client = tgraph.Client(server.address)
    g = tgraph.load_graph(UNET)
    with pytest.raises(tgraph.TgraphError) as e:
        client.rank("layout:nlp:random", g, g.configs[:5])  # no model for it: NOT_FOUND, no registration loop
    assert e.value.code == grpc.StatusCode.NOT_FOUND and "no model is loaded" in e.value.message
    with pytest.raises(tgraph.TgraphError) as e:
        client.rank("layout:xla:random", g, g.configs[:5], folds=[7])  # the server's check
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "folds" in e.value.message
    with pytest.raises(tgraph.TgraphError) as e:
        client.rank("layout:xla:random", g, g.configs[:5, :10])  # checked before any call
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "(c, 62, 18)" in e.value.message
    with pytest.raises(tgraph.TgraphError) as e:
        client.rank("layout:xla:random", g, np.full((2, 62, 18), 9))
    assert "-1..5" in e.value.message
    with pytest.raises(tgraph.TgraphError) as e:
        client.report_measurements("layout:xla:random", g, g.configs[:2], [100, 0])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "runtimes_ns: runtime 1 is 0" in e.value.message
    with pytest.raises(tgraph.TgraphError) as e:
        tgraph.load_graph(os.path.join(SRC, "README.md"))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "README.md" in e.value.message
    with pytest.raises(tgraph.TgraphError) as e:
        tgraph.Graph(np.zeros((3, 139), np.float32), [0, 1, 2], [[1, 0]])
    assert "node_feat must be (n, 140)" in e.value.message
    nobody = tgraph.Client(f"127.0.0.1:{server.port + 1 if server.port < 65535 else 1}", retry_budget=0.3)
    start = time.monotonic()
    with pytest.raises(tgraph.TgraphError) as e:
        nobody.health()
    assert e.value.code == grpc.StatusCode.UNAVAILABLE and time.monotonic() - start < 5


class Recording(grpc.GenericRpcHandler):
    """A stand-in server that records each call's metadata and the size of the request it
    received. RankConfigs answers NOT_FOUND first: with the GRAPH_NOT_REGISTERED reason
    when `reason`, else without (what an unknown collection looks like), whatever the
    message says."""

    def __init__(self, reason):
        self.reason, self.calls, self.received, self.malformed = reason, [], [], False

    def reading(self, message_type):
        def read(data):
            self.received.append(len(data))
            return message_type.FromString(data)
        return read

    def service(self, details):
        method = details.method.rsplit("/", 1)[1]
        self.calls.append((method, dict(details.invocation_metadata)))
        if method == "RegisterGraph":
            def register(request, context):
                g = request.graph
                graph = tgraph.Graph(np.frombuffer(g.node_feat, "<f4").reshape(-1, 140),
                                     np.frombuffer(g.node_opcode, np.uint8), np.frombuffer(g.edge_index, "<i8").reshape(-1, 2),
                                     np.array(g.node_config_ids, np.int64))
                return ranker_pb2.RegisterGraphResponse(graph_hash=graph.content_hash, num_nodes=g.num_nodes)
            return grpc.unary_unary_rpc_method_handler(register, self.reading(ranker_pb2.RegisterGraphRequest),
                                                       ranker_pb2.RegisterGraphResponse.SerializeToString)

        def rank(request, context):
            if sum(1 for m, _ in self.calls if m == "RankConfigs") == 1:
                if self.reason:
                    context.set_trailing_metadata((("tgraph-error-reason", "GRAPH_NOT_REGISTERED"),))
                context.abort(grpc.StatusCode.NOT_FOUND, "a message that says RegisterGraph, which is not the contract")
            n = request.num_configs
            if self.malformed:
                return ranker_pb2.RankConfigsResponse(scores=[0.5] * n, ranking=[0])
            return ranker_pb2.RankConfigsResponse(scores=[0.5] * n, spread=[0.0] * n, ranking=list(range(n)))
        return grpc.unary_unary_rpc_method_handler(rank, self.reading(ranker_pb2.RankConfigsRequest),
                                                   ranker_pb2.RankConfigsResponse.SerializeToString)


@pytest.mark.parametrize("reason", [True, False])
def test_the_client_keys_on_the_reason_not_the_message_and_sends_the_routing_and_size_headers(reason):
    handler = Recording(reason)
    fake = grpc.server(futures.ThreadPoolExecutor(2), handlers=[handler])
    port = fake.add_insecure_port("127.0.0.1:0")
    fake.start()
    try:
        g = tgraph.load_graph(UNET)
        client = tgraph.Client(f"127.0.0.1:{port}")
        if reason:
            assert client.rank("layout:xla:random", g, g.configs[:3]).registrations == 1
            assert [m for m, _ in handler.calls] == ["RankConfigs", "RegisterGraph", "RankConfigs"]
        else:
            with pytest.raises(tgraph.TgraphError) as e:
                client.rank("layout:xla:random", g, g.configs[:3])
            assert e.value.code == grpc.StatusCode.NOT_FOUND
            assert [m for m, _ in handler.calls] == ["RankConfigs"]
        assert all(md.get("x-graph-hash") == g.content_hash for _, md in handler.calls)
        # The size each request declared is the size that arrived (a server that could not
        # read one tells a client's cancel from an oversize by it).
        assert [int(md["x-request-bytes"]) for _, md in handler.calls] == handler.received
        assert min(handler.received) > 100
        if reason:
            # The C++ client (through tgraph-client) sends both headers alike.
            handler.calls.clear(), handler.received.clear()
            r = run([binary("client", "tgraph-client"), "rank", f"--server=127.0.0.1:{port}",
                     "--collection=layout:xla:random", f"--npz={UNET}", "--max_configs=3"])
            assert r.returncode == 0, r.stderr
            assert [m for m, _ in handler.calls] == ["RankConfigs", "RegisterGraph", "RankConfigs"]
            assert all(md.get("x-graph-hash") == g.content_hash for _, md in handler.calls)
            assert [int(md["x-request-bytes"]) for _, md in handler.calls] == handler.received
            # An answer that is not a whole ranking (another server, another version) is
            # an error naming what it lacks, not a crash.
            handler.malformed = True
            r = subprocess.run([binary("client", "tgraph-client"), "rank", f"--server=127.0.0.1:{port}",
                                "--collection=layout:xla:random", f"--npz={UNET}", "--max_configs=3"],
                               capture_output=True, text=True)
            assert r.returncode != 0 and r.returncode > 0, r.stderr
            assert "has 3 scores, 0 spreads and a ranking of 1 for 3 configurations" in r.stderr
            with pytest.raises(tgraph.TgraphError) as e:
                client.rank("layout:xla:random", g, g.configs[:3])
            assert e.value.code == grpc.StatusCode.INTERNAL and "a ranking of 1 for 3" in e.value.message
    finally:
        fake.stop(None)


class Busy(grpc.GenericRpcHandler):
    """ListModels answering RESOURCE_EXHAUSTED (a full queue) `refusals` times, then an
    empty list after `pause` seconds; every call's time recorded."""

    def __init__(self, refusals, pause=0.0):
        self.refusals, self.pause, self.calls = refusals, pause, []

    def service(self, details):
        def models(request, context):
            self.calls.append(time.monotonic())
            if len(self.calls) <= self.refusals:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "the queue is full: retry with backoff")
            time.sleep(self.pause)
            return ranker_pb2.ListModelsResponse()
        return grpc.unary_unary_rpc_method_handler(models, ranker_pb2.ListModelsRequest.FromString,
                                                   ranker_pb2.ListModelsResponse.SerializeToString)


def serve(handler):
    fake = grpc.server(futures.ThreadPoolExecutor(2), handlers=[handler])
    port = fake.add_insecure_port("127.0.0.1:0")
    fake.start()
    return fake, f"127.0.0.1:{port}"


def test_a_deadline_block_retries_a_full_queue_with_backoff_and_ends_every_call_by_its_end():
    handler = Busy(refusals=3)
    fake, address = serve(handler)
    try:
        client = tgraph.Client(address, timeout=60, retry_budget=0)
        with pytest.raises(tgraph.TgraphError) as e:
            client.models()  # outside a block: the code as the server said it, at once
        assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED and len(handler.calls) == 1
        start = time.monotonic()
        with client.deadline(2.0, retry_busy=True):
            assert client.models() == []
        gaps = np.diff(handler.calls)
        # Jittered backoff of 20, 40, 80 ms (half to all of each), then the answer.
        assert len(handler.calls) == 4 and time.monotonic() - start < 1.0
        assert all(lo * 0.5 - 0.002 <= g for lo, g in zip((0.02, 0.04), gaps[1:]))
        handler.refusals, handler.calls = 10 ** 6, []
        start = time.monotonic()
        with pytest.raises(tgraph.TgraphError) as e, client.deadline(0.3, retry_busy=True):
            client.models()
        assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED and time.monotonic() - start < 0.3 + 0.05
        assert 3 <= len(handler.calls) <= 8
        handler.refusals, handler.pause = 0, 1.0
        start = time.monotonic()
        with pytest.raises(tgraph.TgraphError) as e, client.deadline(5.0), client.deadline(0.2):  # the inner end
            client.models()
        assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED and time.monotonic() - start < 0.2 + 0.15
        assert client.timeout == 60 and getattr(client._within, "until", None) is None
    finally:
        fake.stop(None)


def test_a_model_of_ones_own_is_a_collection_for_the_client_too():
    from tgraph._rows import _kind
    assert _kind("layout@tpu-v5e") == "layout" and _kind("tile@gpu-a100") == "tile"
    assert _kind("layout:xla:random") == "layout"
    for bad in ("layout", "graph@x", "tpu-v5e"):
        with pytest.raises(tgraph.TgraphError) as e:
            _kind(bad)
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "layout@NAME" in str(e.value)


def test_generated_modules_cannot_shadow_grpcio_or_protobuf():
    """Every generated module lies inside the tgraph package; grpc and google.protobuf are
    grpcio's and protobuf's own wherever the package is installed (a build folder, a venv)."""
    from google import protobuf
    from tgraph.hlo import hlo_pb2
    from tgraph.v1 import ranker_pb2_grpc
    package = os.path.dirname(tgraph.__file__)
    for module in (ranker_pb2, ranker_pb2_grpc, tuning_pb2, hlo_pb2):
        assert os.path.dirname(os.path.dirname(module.__file__)) == package, module.__file__
    assert os.path.exists(os.path.join(os.path.dirname(grpc.__file__), "_channel.py"))  # grpcio's
    assert os.path.exists(os.path.join(os.path.dirname(protobuf.__file__), "message.py"))
    for root in (os.path.dirname(os.path.dirname(grpc.__file__)), os.path.dirname(package)):
        assert not os.path.exists(os.path.join(root, "grpc", "tgraph")) and not os.path.exists(os.path.join(root, "google", "tgraph"))
    assert tgraph.v1.ranker_pb2.DESCRIPTOR.package == "tgraph.v1"


def test_stubs_generated_from_the_public_protos_live_under_tgraph_only(tmp_path):
    """docs/api.md's command for another language's stubs: every .proto under proto/
    outside internal/ is a tgraph.* package, and the generated tree has tgraph/ alone."""
    public = [os.path.relpath(p, os.path.join(SRC, "proto"))
              for p in glob.glob(os.path.join(SRC, "proto", "**", "*.proto"), recursive=True)
              if not p.startswith(os.path.join(SRC, "proto", "internal") + os.sep)]
    assert sorted(public) == ["tgraph/hlo/autotuning.proto", "tgraph/hlo/hlo.proto", "tgraph/hlo/tuning.proto",
                              "tgraph/v1/ranker.proto"]
    for rel in public:
        text = open(os.path.join(SRC, "proto", rel)).read()
        assert re.search(r"^package tgraph\.", text, re.M), rel
    run([sys.executable, "-m", "grpc_tools.protoc", "-I", os.path.join(SRC, "proto"), f"--python_out={tmp_path}",
         f"--grpc_python_out={tmp_path}"] + [os.path.join(SRC, "proto", rel) for rel in public])
    assert sorted(os.listdir(tmp_path)) == ["tgraph"]


@pytest.mark.debian_python
def test_installs_into_a_venv_without_network(tmp_path, server):
    """python3 -m venv --system-site-packages; pip install --no-build-isolation --no-index
    client/python: Debian's setuptools and grpc_tools build it, no network."""
    src = tmp_path / "src"
    shutil.copytree(os.path.join(SRC, "client", "python"), src / "client" / "python",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    shutil.copytree(os.path.join(SRC, "proto"), src / "proto")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", "--quiet",
         str(src / "client" / "python")])
    code = ("import tgraph, sys; c = tgraph.Client(sys.argv[1]); "
            "print(tgraph.__file__); print(c.rank('layout:xla:random', sys.argv[2], top_k=2).order.tolist())")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([str(venv / "bin" / "python"), "-c", code, server.address, UNET], capture_output=True,
                       text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith(str(venv))
    assert len(eval(r.stdout.splitlines()[1])) == 2


@pytest.mark.debian_python
def test_a_wheel_installs_into_a_python_without_debians_packages_and_declares_its_dependencies(tmp_path, server):
    """docs/python.md: a wheel built once (stubs included) for any Python 3 >= 3.9; pip
    fetches grpcio, protobuf and numpy from the user's index. Here there is no index:
    the venv has none of them (an import fails naming one), and with the system's copies
    on PYTHONPATH in their place it ranks."""
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
         os.path.join(SRC, "client", "python"), "-w", str(dist)])
    wheels = list(dist.glob("tgraph-*-py3-none-any.whl"))
    assert len(wheels) == 1
    venv = tmp_path / "bare"
    run([sys.executable, "-m", "venv", str(venv)])  # no --system-site-packages
    run([str(venv / "bin" / "pip"), "install", "--no-index", "--no-deps", "--quiet", str(wheels[0])])
    show = run([str(venv / "bin" / "pip"), "show", "tgraph"]).stdout
    requires = re.search(r"^Requires: (.*)$", show, re.M).group(1)
    assert sorted(r.strip() for r in requires.split(",")) == ["grpcio", "numpy", "protobuf"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    bare = subprocess.run([str(venv / "bin" / "python"), "-c", "import tgraph"], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert bare.returncode != 0 and "ModuleNotFoundError: No module named" in bare.stderr
    deps = sorted({os.path.dirname(os.path.dirname(m.__file__)) for m in (grpc, np)})
    code = ("import sys, tgraph; print(tgraph.__file__); "
            "print(tgraph.Client(sys.argv[1]).rank('layout:xla:random', sys.argv[2], top_k=2).order.tolist())")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", code, server.address, UNET], capture_output=True,
                       text=True, env=dict(env, PYTHONPATH=os.pathsep.join(deps)), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith(str(venv))
    assert len(eval(r.stdout.splitlines()[1])) == 2


def test_the_documented_autotuner_loop_runs(server, world):
    """client/python/examples/autotune.py, the loop docs/python.md shows."""
    r = run([sys.executable, os.path.join(SRC, "client", "python", "examples", "autotune.py"), server.address, UNET])
    lines = r.stdout.splitlines()
    assert len(lines) == 5 and lines[-1].endswith("after 40 measurements")
    best = [int(re.search(r"best (\d+) ns", line).group(1)) for line in lines]
    assert best == sorted(best, reverse=True)  # the best found never gets worse
    assert min(best) >= int(tgraph.load_graph(UNET).runtimes.min())


def test_tls_and_mutual_tls_rank_like_plaintext(tmp_path, world, server):
    certs = str(tmp_path / "certs")
    run([os.path.join(SRC, "scripts", "dev-certs"), certs])
    pem = lambda name: os.path.join(certs, name)
    plain = tgraph.Client(server.address).rank("layout:xla:random", UNET)
    mtls = Server(world["registry"], str(tmp_path), extra=[
        f"--tls_cert={pem('server.pem')}", f"--tls_key={pem('server.key')}", f"--tls_client_ca={pem('ca.pem')}"])
    try:
        # Paths or bytes; the same scores as over plaintext.
        with tgraph.Client(mtls.address, tls_ca=pem("ca.pem"), tls_cert=pem("client.pem"),
                           tls_key=open(pem("client.key"), "rb").read()) as client:
            ranking = client.rank("layout:xla:random", UNET)
        assert np.array_equal(ranking.scores, plain.scores)
        # Refused handshakes are named as TLS's (UNAUTHENTICATED) and not retried for the
        # 30 s budget: no client certificate, another CA's, plaintext, a server certificate
        # of another CA, a TLS client at a plaintext server.
        for address, kwargs, says in [
                (mtls.address, dict(tls_ca=pem("ca.pem")), "it requires a client certificate (mutual TLS)"),
                (mtls.address, dict(tls_ca=pem("ca.pem"), tls_cert=pem("other-client.pem"),
                                    tls_key=pem("other-client.key")), "it refused this client's certificate"),
                (mtls.address, dict(), "the server speaks TLS and this client connected in plaintext"),
                (mtls.address, dict(tls_ca=pem("other-ca.pem")), "does not chain to the CAs of tls_ca"),
                (server.address, dict(tls_ca=pem("ca.pem")), "the server does not speak TLS")]:
            started = time.monotonic()
            with pytest.raises(tgraph.TgraphError) as e:
                tgraph.Client(address, retry_budget=30, **kwargs).health()
            assert e.value.code == grpc.StatusCode.UNAUTHENTICATED, (kwargs, e.value)
            assert f"TLS with {address} failed: " in e.value.message and says in e.value.message, e.value.message
            assert time.monotonic() - started < 10, kwargs
    finally:
        mtls.stop()
    # Bad arguments are refused before any call, naming the argument.
    with pytest.raises(tgraph.TgraphError, match="both tls_cert and tls_key"):
        tgraph.Client(server.address, tls_cert=pem("client.pem"))
    with pytest.raises(tgraph.TgraphError, match="tls_ca: .*absent.pem: cannot read"):
        tgraph.Client(server.address, tls_ca=pem("absent.pem"))
    with pytest.raises(tgraph.TgraphError, match="tls_key: .*client.pem holds no PEM block"):
        tgraph.Client(server.address, tls_cert=pem("client.pem"), tls_key=pem("client.pem"))


JAX = os.path.join(REAL, "hlo", "jax", "mlp_train_step.")


def test_layout_rows_that_are_not_whole_numbers_are_refused_naming_row_instruction_and_slot(server):
    client = tgraph.Client(server.address)
    module = tgraph.HloModule.from_file(JAX + "before_optimizations.txt")
    reg = client.register(module)
    rows = np.full((2, len(reg.configurable_nodes), 18), -1.0)
    rows[1, 3, 7] = 1.5
    with pytest.raises(tgraph.TgraphError) as e:
        client.rank("layout:xla:random", module, rows)
    node = reg.configurable_nodes[3]
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.message == (f"configs: config 1, configurable node 3 ({node.opcode} '{node.instruction}'), slot 7 "
                               "(input group) is 1.5, expected an integer in -1..5")
    rows[1, 3, 7] = np.nan
    with pytest.raises(tgraph.TgraphError) as e:
        client.search("layout:xla:random", module, exclude=rows)
    assert e.value.message.startswith("exclude: config 1, configurable node 3") and "is nan" in e.value.message
    rows[1, 3, 6:8] = [0.0, -1.0]  # whole floats are taken, as tgraph-client takes them from an .npy
    assert client.rank("layout:xla:random", module, rows).scores.shape == (2,)
    graph = tgraph.load_graph(UNET)  # an array graph: nodes by index
    bad = graph.configs[:1].astype(np.float64)
    bad[0, 2, 0] = 0.5
    with pytest.raises(tgraph.TgraphError) as e:
        client.rank("layout:xla:random", graph, bad)
    assert e.value.message.startswith(f"configs: config 0, configurable node 2 (node {graph.node_config_ids[2]}), "
                                      "slot 0 (output group) is 0.5")
    for runtimes, shown in (([100, float("nan")], "nan"), ([100, float("inf")], "inf"), ([100, 1e30], "1e+30"),
                            ([100, 1.9], "1.9"), ([100, -5], "-5")):
        with pytest.raises(tgraph.TgraphError) as e:
            client.report_measurements("layout:xla:random", graph, graph.configs[:2], runtimes)
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert e.value.message.startswith(f"runtimes_ns: runtime 1 is {shown};"), e.value.message


def test_apply_writes_a_row_into_a_modules_text_and_says_what_jax_takes(server, tmp_path):
    client = tgraph.Client(server.address)
    module = tgraph.HloModule.from_file(JAX + "before_optimizations.txt")
    reg = client.register(module)
    names = [n.instruction for n in reg.configurable_nodes]
    row = reg.layout_row({"dot_general.5": [[], [0, 1]]})   # x, column-major
    applied = client.apply(module, row)
    assert applied.copies == 1 and applied.needs_hook == []
    (e,) = applied.entry_layouts
    assert (e.result, e.index, e.name, e.shape, e.minor_to_major) == (False, 13, "x", "f32[128,784]", [0, 1])
    assert e.jax == "Format(Layout(major_to_minor=(1, 0)), sharding)" and e.asked_by == "dot_general.5 input"
    # The same text tgraph-featurize apply writes.
    rows_file = tmp_path / "row.npy"
    np.save(rows_file, row[None])
    out = tmp_path / "applied.txt"
    cli = run([binary("model", "hlo", "tgraph-featurize"), "apply", "--in", JAX + "before_optimizations.txt",
               "--configs", str(rows_file), "--out", str(out)])
    assert out.read_text() == applied.text
    assert "argument 13 x f32[128,784]: Format(Layout(major_to_minor=(1, 0)), sharding)  (dot_general.5 input)" in cli.stdout
    # Re-registered: the same configurable instructions, in the same row order.
    again = client.register(tgraph.HloModule(applied.text))
    assert [n.instruction for n in again.configurable_nodes] == names
    # A path works as the module; a proto has no text to write into; a wrong row is refused.
    assert client.apply(JAX + "before_optimizations.txt", row).text == applied.text
    with pytest.raises(tgraph.TgraphError) as err:
        client.apply(JAX + "before_optimizations.hlo.pb", row)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "not HLO text" in err.value.message
    with pytest.raises(tgraph.TgraphError) as err:
        client.apply(module, np.full((len(names) + 1, 18), -1))
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_a_modules_measurements_are_reported_from_rows_and_runtimes_by_python_and_the_cli(server, world, tmp_path):
    client = tgraph.Client(server.address)
    module = tgraph.HloModule.from_file(JAX + "before_optimizations.txt")
    reg = client.register(module)
    rows = np.full((3, len(reg.configurable_nodes), 18), -1, np.int8)
    rows[1] = reg.layout_row({"dot_general.5": [[1, 0]]})
    receipt = client.report_measurements("layout:xla:random", module, rows, [1_200_000, 1_150_000, 1_300_000],
                                         source="h100")
    assert receipt.stored == 3
    np.save(tmp_path / "rows.npy", rows)
    (tmp_path / "runtimes.txt").write_text("1200000\n1150000, 1300000  # ns\n")
    cli = binary("client", "tgraph-client")
    out = run([cli, "report", "--server", server.address, "--collection", "layout:xla:random", "--hlo",
               JAX + "before_optimizations.txt", "--configs", str(tmp_path / "rows.npy"), "--runtimes",
               str(tmp_path / "runtimes.txt"), "--json"]).stdout
    assert '"stored":3' in out.replace(" ", "")
    stored = glob.glob(os.path.join(world["tmp"], "store", "**", reg.graph_hash[:12] + "*"), recursive=True) or \
        glob.glob(os.path.join(world["tmp"], "store", "**", "*.npz"), recursive=True)
    assert stored
    (tmp_path / "short.txt").write_text("1200000 1150000")
    r = subprocess.run([cli, "report", "--server", server.address, "--collection", "layout:xla:random", "--hlo",
                        JAX + "before_optimizations.txt", "--configs", str(tmp_path / "rows.npy"), "--runtimes",
                        str(tmp_path / "short.txt")], capture_output=True, text=True)
    assert r.returncode == 1 and "has 2 runtimes for the 3 rows" in r.stderr
    (tmp_path / "bad.txt").write_text("1200000 1.5 3")
    r = subprocess.run([cli, "report", "--server", server.address, "--collection", "layout:xla:random", "--hlo",
                        JAX + "before_optimizations.txt", "--configs", str(tmp_path / "rows.npy"), "--runtimes",
                        str(tmp_path / "bad.txt")], capture_output=True, text=True)
    assert r.returncode == 1 and "bad.txt: runtime 1 is 1.5" in r.stderr


def test_todays_jax_dumps_register_as_one_graph_and_the_optimized_one_says_which_to_send(server):
    client = tgraph.Client(server.address)
    text = client.register(JAX + "before_optimizations.txt")
    proto = client.register(JAX + "before_optimizations.hlo.pb")
    assert text.graph_hash == proto.graph_hash and not text.warnings
    assert [n.instruction for n in text.configurable_nodes] == [n.instruction for n in proto.configurable_nodes]
    after_text = client.register(JAX + "sm_9.0a_gpu_after_optimizations.txt")
    after_proto = client.register(JAX + "sm_9.0a_gpu_after_optimizations.hlo.pb")
    assert after_text.graph_hash == after_proto.graph_hash
    (warning,) = after_text.warnings
    assert "was dumped after XLA's optimization passes" in warning and "before_optimizations" in warning
    r = subprocess.run([binary("client", "tgraph-client"), "register", "--server", server.address, "--hlo",
                        JAX + "sm_9.0a_gpu_after_optimizations.txt"], capture_output=True, text=True)
    assert r.returncode == 0 and "tgraph-client: warning: module jit_step was dumped after XLA's optimization" in r.stderr



def test_the_clients_caches_are_bounded_and_what_falls_out_registers_again(server):
    """A farm's client registers module after module: the caches keep the most recently
    used (64 modules' configurable nodes), and a module that fell out is registered again
    when its rows are next checked, transparently."""
    client = tgraph.Client(server.address)
    modules = [tgraph.HloModule(
        f"HloModule cache_{i}\nENTRY e {{\n  a = f32[4,{i + 2}]{{1,0}} parameter(0)\n"
        f"  ROOT d = f32[4,4]{{1,0}} dot(a, a), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}\n}}\n".encode())
        for i in range(70)]
    for m in modules:
        client.register(m)
    assert len(client._nodes) == 64 and len(client._hlo) == 70
    first = modules[0]
    assert client._hlo[first.digest] not in client._nodes  # fell out
    calls = client._register_calls
    rows = -np.ones((1, 1, 18), np.int8)
    ranking = client.rank("layout:xla:random", first, rows)
    assert ranking.scores.shape == (1,)
    assert client._register_calls == calls + 1 and client._hlo[first.digest] in client._nodes


def test_a_directory_or_missing_file_given_as_a_module_or_graph_is_a_tgraph_error_naming_it(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    for read in (tgraph.HloModule.from_file, tgraph.load_graph):
        with pytest.raises(tgraph.TgraphError) as e:
            read(dump)
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert e.value.message.startswith(f"{dump}: a directory, not a file: give one file of it"), e.value.message
    with pytest.raises(tgraph.TgraphError) as e:
        tgraph.HloModule.from_file(dump / "module.txt")
    assert (e.value.code, e.value.message) == (grpc.StatusCode.NOT_FOUND, f"{dump / 'module.txt'}: no such file")
    # Given to a call as a path: the same, before any RPC (nothing listens there).
    client = tgraph.Client("127.0.0.1:1", timeout=1, retry_budget=0)
    with pytest.raises(tgraph.TgraphError) as e:
        client.rank("layout:xla:random", str(dump))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "a directory, not a file" in e.value.message


def test_a_searchs_reference_makes_rank_repeat_its_scores(server):
    client = tgraph.Client(server.address)
    module = tgraph.HloModule.from_file(JAX + "before_optimizations.txt")
    found = client.search("layout:xla:random", module, results=4, max_evaluations=256, seed=3)
    assert found.reference.shape == (found.reference_configs,) + found.configs.shape[1:]
    again = client.rank("layout:xla:random", module, found.configs, reference=found.reference)
    assert np.allclose(again.scores, found.scores, atol=2e-3), (again.scores, found.scores)
    # Against the server's own reference (the request's rows): other scores.
    assert not np.allclose(client.rank("layout:xla:random", module, found.configs).scores, found.scores, atol=2e-3)
