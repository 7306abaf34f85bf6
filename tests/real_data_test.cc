// Every real TpuGraphs file in tests/data/real (README there: provenance) through the
// readers: the npz layer, the typed loaders, the dataset walker; values compared with
// what numpy reads from the same files.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>

#include "model/core/dataset.h"
#include "model/core/graph_io.h"
#include "tests/test_util.h"

using namespace tgraph;

namespace {

const std::string kReal = TGRAPH_REAL_DATA;

struct Expected {
  std::string collection, split;
  int64_t nodes, config_nodes, configs;
  bool runtimes_hidden;
};

// From the README of the real data (and numpy.load of each file).
const std::map<std::string, Expected>& RealFiles() {
  static const auto* files = new std::map<std::string, Expected>{
      {"npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz", {"layout:xla:default", "valid", 3163, 62, 1965, false}},
      {"npz/layout/xla/random/valid/unet_3d.4x4.bf16.npz", {"layout:xla:random", "valid", 3163, 62, 481, false}},
      {"npz/layout/xla/default/test/cd708819d3f5103afd6460b15e74eaf3.npz", {"layout:xla:default", "test", 490, 38, 1000, true}},
      {"npz/layout/xla/random/test/cd708819d3f5103afd6460b15e74eaf3.npz", {"layout:xla:random", "test", 490, 38, 1000, true}},
      {"npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz", {"layout:nlp:default", "test", 21918, 848, 1001, true}},
      {"npz/layout/nlp/random/test/23559853d9702baaaacbb0c83fd32266.npz", {"layout:nlp:random", "test", 1096, 56, 1000, true}},
      {"npz/tile/xla/train/retinanet.2x2.fp32_-342c949e14733d96.npz", {"tile:xla", "train", 2, 0, 2, false}},
      {"npz/tile/xla/valid/inception_v3_batch_128_train_426e203f19335d17.npz", {"tile:xla", "valid", 2, 0, 9, false}},
      {"npz/tile/xla/test/0a1c5dcfa9f1f4ebcc1282a1d1ca8ecb.npz", {"tile:xla", "test", 2, 0, 32, true}},
      {"npz/tile/xla/test/0a3585c3e686065389227fa374175e48.npz", {"tile:xla", "test", 52, 0, 1282, true}},
      {"npz/tile/xla/test/0a8a2b247d7a20b9dcab1daf50066a4d.npz", {"tile:xla", "test", 15, 0, 807, true}},
      {"npz/tile/xla/test/0abaea94d7b0a1c1f1b0bd23b73ce38c.npz", {"tile:xla", "test", 21, 0, 52, true}},
      {"npz/tile/xla/test/0ac539372cc77cc6791794b369b984e1.npz", {"tile:xla", "test", 65, 0, 2951, true}},
      {"npz/tile/xla/test/d6f5f54247bd1e58a10b9e7062c636ab.npz", {"tile:xla", "test", 2, 0, 25, true}},
  };
  return *files;
}

}  // namespace

TEST_CASE("every real file is listed here, and loads with its collection's loader", "[real]") {
  int on_disk = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(kReal + "/npz"))
    on_disk += e.is_regular_file() && e.path().extension() == ".npz";
  CHECK(on_disk == static_cast<int>(RealFiles().size()));
  for (const auto& [rel, x] : RealFiles()) {
    INFO(rel);
    const std::string path = kReal + "/" + rel;
    bool hidden = true;
    if (x.collection.rfind("tile", 0) == 0) {
      auto g = LoadTileGraph(path);
      REQUIRE(g.ok());
      CHECK(g->graph.num_nodes == x.nodes);
      CHECK(g->num_configs == x.configs);
      for (size_t i = 0; i < g->config_runtime.size(); ++i) hidden &= g->config_runtime[i] == 0 && g->config_runtime_normalizers[i] == 1;
    } else {
      auto g = LoadLayoutGraph(path);
      REQUIRE(g.ok());
      CHECK(g->graph.num_nodes == x.nodes);
      CHECK(g->num_config_nodes() == x.config_nodes);
      CHECK(g->num_configs == x.configs);
      CHECK(g->node_splits.front() == 0);
      CHECK(g->node_splits.back() == x.nodes);
      for (int64_t r : g->config_runtime) hidden &= r == 0;
    }
    CHECK(hidden == x.runtimes_hidden);
  }
}

TEST_CASE("real layout files: Fortran-ordered edge_index read as numpy reads it", "[real]") {
  const std::string path = kReal + "/npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz";
  auto npz = ReadNpz(path);
  REQUIRE(npz.ok());
  const NpyArray& e = npz->at("edge_index");
  CHECK(e.fortran_order);
  CHECK(e.shape == std::vector<int64_t>{5112, 2});
  // numpy: edge_index[:4] = [[2, 0], [2, 1], [5, 3], [5, 4]], edge_index[-2:] =
  // [[3162, 3153], [3162, 3161]]; node_splits = [[0, 449, 453, 467, 471, 498, 502, 3163]].
  const int64_t* v = e.data<int64_t>();
  CHECK(std::vector<int64_t>(v, v + 8) == std::vector<int64_t>{2, 0, 2, 1, 5, 3, 5, 4});
  CHECK(std::vector<int64_t>(v + 2 * 5110, v + 2 * 5112) == std::vector<int64_t>{3162, 3153, 3162, 3161});
  auto g = LayoutGraphFromNpz(*npz, path);
  REQUIRE(g.ok());
  CHECK(g->node_splits == std::vector<int64_t>{0, 449, 453, 467, 471, 498, 502, 3163});
  CHECK(npz->at("node_opcode").dtype == DType::kUint8);
  // Written back, the member's .npy header is byte for byte the real one.
  const std::string header = SerializeNpy(e).substr(0, 128);
  CHECK(header == std::string("\x93NUMPY\x01\x00v\x00", 10) +
                      "{'descr': '<i8', 'fortran_order': True, 'shape': (5112, 2), }" + std::string(56, ' ') + "\n");
}

TEST_CASE("real files survive a load/save round trip with every value, dtype, shape and order", "[real]") {
  TempDir dir;
  for (const auto& [rel, x] : RealFiles()) {
    INFO(rel);
    const std::string path = kReal + "/" + rel, out = dir.path() + "/copy.npz";
    const bool tile = x.collection.rfind("tile", 0) == 0;
    if (tile) {
      auto g = LoadTileGraph(path);
      REQUIRE(SaveTileGraph(out, *g).ok());
      auto back = LoadTileGraph(out);
      REQUIRE(back.ok());
      CHECK(back->graph.node_feat == g->graph.node_feat);
      CHECK(back->graph.edge_index == g->graph.edge_index);
      CHECK(back->config_feat == g->config_feat);
      CHECK(back->config_runtime_normalizers == g->config_runtime_normalizers);
    } else {
      auto g = LoadLayoutGraph(path);
      REQUIRE(SaveLayoutGraph(out, *g).ok());
      auto back = LoadLayoutGraph(out);
      REQUIRE(back.ok());
      CHECK(back->graph.node_feat == g->graph.node_feat);
      CHECK(back->graph.edge_index == g->graph.edge_index);
      CHECK(back->config_feat == g->config_feat);
      CHECK(back->node_splits == g->node_splits);
    }
    auto a = ReadNpz(path), b = ReadNpz(out);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    REQUIRE(a->size() == b->size());
    for (const auto& [key, arr] : *a) {
      INFO(key);
      REQUIRE(b->count(key) == 1);
      const NpyArray& c = b->at(key);
      CHECK(c.dtype == arr.dtype);
      CHECK(c.shape == arr.shape);
      CHECK(c.fortran_order == arr.fortran_order);  // layout edge_index Fortran, the rest C, as real
      CHECK(c.bytes == arr.bytes);
    }
  }
}

TEST_CASE("the real files form a dataset root every collection walks", "[real]") {
  std::map<std::string, int> counted;
  for (const auto& [rel, x] : RealFiles()) counted[x.collection + "/" + x.split]++;
  for (const auto& [key, n] : counted) {
    const std::string coll = key.substr(0, key.find('/')), split = key.substr(key.find('/') + 1);
    auto files = ListSplit(kReal, *ParseCollection(coll), split);
    REQUIRE(files.ok());
    CHECK(static_cast<int>(files->size()) == n);
  }
}
