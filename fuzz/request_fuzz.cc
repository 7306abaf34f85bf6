// libFuzzer target: untrusted bytes as the server's two busiest requests, decoded and
// admitted as the server does before any compute. The input is a RegisterGraphRequest
// (its length as 4 little-endian bytes, then its bytes: arrays or an HLO module) and a
// RankConfigsRequest (the rest) against the graph it registered: the registration's
// decoding, pruning and layout space, then every field check of the ranking and the
// legality of its layout rows. The model is left out (it needs LibTorch, and a model
// sees only what admission let through). A crash, a leak, a sanitizer report or a hang
// is a defect; an error is the right answer to most inputs.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "model/core/layout_space.h"
#include "proto/graph_codec.h"
#include "server/graph_store.h"
#include "server/rank_request.h"

namespace {

constexpr int64_t kWorkingBytes = 64 << 20;  // a module's working memory, as a server bounds it

tgraph::RankRequest RankOf(const tgraph::v1::RankConfigsRequest& r) {
  tgraph::RankRequest q;  // the fields as the service copies them (server/service.cc)
  q.collection = r.collection();
  q.model_version = r.model_version();
  q.graph_hash = r.graph_hash();
  q.num_configs = r.num_configs();
  q.layout_configs = r.layout_configs();
  q.tile_configs = r.tile_configs();
  q.top_k = r.top_k();
  q.num_reference_configs = r.num_reference_configs();
  q.reference_layout_configs = r.reference_layout_configs();
  q.reference_tile_configs = r.reference_tile_configs();
  q.folds.assign(r.folds().begin(), r.folds().end());
  q.cascade = r.cascade();
  return q;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t head = 0;
  std::memcpy(&head, data, 4);
  const size_t register_bytes = std::min<size_t>(head, size - 4);
  tgraph::v1::RegisterGraphRequest reg;
  if (!reg.ParseFromArray(data + 4, static_cast<int>(register_bytes))) return 0;

  int64_t reserved = 0;
  tgraph::hlo::Limits limits;
  limits.max_instructions = 20000;
  limits.reserve = [&reserved](int64_t bytes) {
    reserved += bytes;
    return reserved > kWorkingBytes ? absl::ResourceExhaustedError("over the fuzz target's working memory")
                                    : absl::OkStatus();
  };
  absl::StatusOr<tgraph::WireGraph> g = tgraph::DecodeRegistration(reg, limits);
  if (!g.ok()) return 0;
  tgraph::GraphStore graphs(256 << 20);
  absl::StatusOr<tgraph::StoredGraphResult> stored = graphs.Register(std::move(*g));
  if (!stored.ok()) return 0;
  const tgraph::StoredGraph& graph = *stored->graph;

  tgraph::v1::RankConfigsRequest rank;
  const size_t rest = size - 4 - register_bytes;
  if (!rank.ParseFromArray(data + 4 + register_bytes, static_cast<int>(rest))) return 0;
  const tgraph::RankRequest q = RankOf(rank);
  for (tgraph::CollectionKind kind : {tgraph::CollectionKind::kLayout, tgraph::CollectionKind::kTile}) {
    if (!tgraph::ValidateRankRequest(q, kind, graph.num_config_nodes, 4, 1, {}).ok()) continue;
    if (kind != tgraph::CollectionKind::kLayout) continue;
    // As admission does: rows given are checked (absent ones are the other kind's).
    if (!q.layout_configs.empty())
      (void)tgraph::FirstIllegalLayoutRow(graph.space, reinterpret_cast<const int8_t*>(q.layout_configs.data()),
                                          q.num_configs);
    if (!q.reference_layout_configs.empty())
      (void)tgraph::FirstIllegalLayoutRow(
          graph.space, reinterpret_cast<const int8_t*>(q.reference_layout_configs.data()), q.num_reference_configs);
  }
  return 0;
}
