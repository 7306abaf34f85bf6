// The client library an autotuner links: one channel with sensible arguments
// (keepalive, message sizes), per-call deadlines, graphs registered once and
// re-registered transparently when a server says the graph is not registered (the
// machine-readable reason of proto/error_reason.h), UNAVAILABLE retried with
// exponential backoff within a retry budget, every other error surfaced as an absl::Status.
//
// Threads: a RankerClient may be used from several threads at once: after construction
// it holds only its options and the gRPC channel and stubs, which gRPC makes safe to
// share. Results are plain values the caller owns; the library's types carry no protobuf.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/graph.h"
#include "model/core/layout_space.h"
#include "proto/model_codec.h"

namespace tgraph {

// TLS to the server (server/tls.h). The PEM contents, not file names: TlsFromFiles
// reads files with precise errors.
struct ClientTlsOptions {
  bool enabled = false;
  std::string root_certs_pem;   // CAs the server's certificate must chain to; empty: gRPC's default roots
  std::string cert_chain_pem;   // the client's own certificate (mutual TLS), with private_key_pem
  std::string private_key_pem;
  std::string server_name;      // the name the server's certificate must carry, when not the target's host
};

// TLS options from PEM files (each may be empty but cert and key go together), enabled.
// Errors name the flag (--tls_ca, --tls_cert, --tls_key) and the file.
absl::StatusOr<ClientTlsOptions> TlsFromFiles(const std::string& ca_file, const std::string& cert_file,
                                              const std::string& key_file, const std::string& server_name);

struct ClientOptions {
  std::string target = "127.0.0.1:50051";
  ClientTlsOptions tls{};        // plaintext unless tls.enabled
  double timeout_s = 60;         // deadline of each RPC
  // UNAVAILABLE (no server listening, a restart, a drain) is retried, each time once the
  // channel is connected again and after a backoff of 0.1 s, 0.2 s, 0.4 s ... capped at
  // 2 s, for up to this long in all: long enough to ride over a server restart (over a
  // second) or a pod being replaced. 0: no retries.
  double retry_budget_s = 30;
  double initial_backoff_s = 0.1;
  int64_t max_message_bytes = int64_t{256} << 20;
};

struct RankOptions {
  std::string collection;
  int64_t model_version = 0;  // 0 = latest
  int64_t top_k = 0;
  std::vector<int> folds;
  bool cascade = false;       // the top-k cascade (needs top_k > 0): ranker.proto
  // The reference to score against (ranker.proto, docs/api.md "What a score means"):
  // reference_count rows, layout (count x nc x 18) or tile (count x 24); none: the
  // server chooses it from the request's rows.
  int64_t reference_count = 0;
  std::vector<int8_t> reference_layout;
  std::vector<float> reference_tile;
};

struct Ranking {
  std::vector<float> scores;   // per config, lower = predicted faster
  std::vector<float> spread;   // across folds
  std::vector<int32_t> order;  // fastest first (top_k)
  int64_t model_version = 0;
  double server_total_ms = 0, inference_ms = 0, graph_prepare_ms = 0, queue_ms = 0;
  bool cache_hit = false;
  int64_t rescored = 0;        // configurations scored by every fold
  int64_t reference_configs = 0;  // configurations in the reference the scores are computed against
  int registrations = 0;       // RegisterGraph calls this ranking needed (0 when the server knew the graph)
};

// What SearchConfigs may do (ranker.proto, docs/api.md "Searching").
struct SearchConfigsOptions {
  std::string collection;       // a layout collection, or a tile collection with a tile space
  int64_t model_version = 0;    // 0 = latest
  // Configurations to propose, and configurations the search's fitness may score; 0:
  // the server's defaults (Proposals says how many it evaluated).
  int64_t results = 0;
  int64_t max_evaluations = 0;
  // Rows (count x nc x 18) never to return: what was measured, in the order measured (with
  // exclude_runtimes_ns the server tells from that order whether the loop has stalled).
  std::vector<int8_t> exclude;
  std::vector<int8_t> start;    // rows to start from: measured good ones
  uint64_t seed = 0;
  // When not empty, the only rows the search may score and return (e.g. a file's
  // measured pool, so real runtimes judge it; SearchConfigsRequest.candidate_layout_configs).
  std::vector<int8_t> candidates;
  // The exclude rows' measured runtimes (ns), in order, or none: with 4 or more the search
  // also follows what they say about this graph; a tile search's prior with 2 or more
  // (SearchConfigsRequest.exclude_runtimes_ns).
  std::vector<int64_t> exclude_runtimes_ns;
  // Tile collections: rows (count x 24) never to return, the measured ones; a tile search
  // takes only these, their runtimes and `results` (it scores every legal configuration).
  std::vector<float> exclude_tiles;
  // The trust region: the most layout groups a proposal may change from the nearest of
  // the default and the start rows (0: the server's default; -1: the whole space).
  int64_t max_changed_groups = 0;
  // Layout searches: the rows the server's store holds of the graph join `exclude` and
  // their runtimes, and when any join without `start` the fastest 16 measured start the search
  // (SearchConfigsRequest.include_stored_measurements; Proposals::stored_measurements).
  bool include_stored = false;
};

// SearchConfigs' proposals: the model's picks best first, then any variation.
struct Proposals {
  std::vector<int8_t> rows;     // count x nc x 18
  std::vector<float> tile_rows;          // tile collections: count x 24
  std::vector<std::string> tile_names;   // and each one's parameters, "128x128x64 w4 s3"
  int64_t count = 0;
  std::vector<float> scores, spread;
  int64_t model_version = 0;
  int64_t evaluations = 0, generations = 0, reference_configs = 0;
  // Layout: the reference the scores were computed against (reference_configs x nc x 18);
  // RankOptions::reference_layout with it scores the same rows the same, before correction.
  std::vector<int8_t> reference_rows;
  int64_t correction_measurements = 0;  // runtimes the scores were corrected with
  double correction_weight = 0;         // the correction's weight beside the model's (3 at most; docs/api.md)
  int64_t max_changed_groups = 0;       // the trust region the search ran with (0: none)
  int64_t variation = 0;                // the last rows are random variation of the fastest measured (stalled)
  int64_t stored_measurements = 0;      // include_stored: the store's rows joined besides `exclude`
  int64_t older_stored_reports = 0;     // include_stored: the graph's reports older than those joined
  int64_t start_configs = 0;            // the start rows the search ran from (given, or the store's fastest)
  double server_total_ms = 0, inference_ms = 0;
  int registrations = 0;
};

// What ReportMeasurements stored.
struct MeasurementReceipt {
  int64_t stored = 0;     // measurements stored durably
  std::string shard;      // the shard written, relative to the server's store
  int registrations = 0;  // RegisterGraph calls the report needed
  bool already_stored = false;  // a retry found the report stored by an earlier attempt
};

// A model collection the server serves (ListModels), newest loaded version first.
// ModelInfo: proto/model_codec.h.


// A configurable node as RegisterGraph lists it (configuration-row order).
struct ConfigurableNode {
  int64_t node = 0;
  std::string opcode, instruction, computation;  // names empty for graphs sent as arrays
  // Its layout search space: output, input and kernel groups, each with the rank a legal
  // row respects and the layouts an autotuner tries (model/core/layout_space.h, docs/api.md).
  std::vector<GroupSpace> groups;
};

struct RegisteredGraph {
  std::string graph_hash;
  int64_t num_nodes = 0, pruned_nodes = 0;
  bool already_registered = false;
  std::vector<ConfigurableNode> configurable_nodes;
  std::vector<std::string> warnings;
};

// An XLA HLO module to rank layouts for, featurized locally with the server's code
// (model/hlo), so that its content hash and configurable nodes are known before any
// RPC and the module itself is sent only when a server does not know the graph.
struct HloProgram {
  std::string serialized;                        // HLO text, or xla.HloProto / xla.HloModuleProto bytes
  std::string module_name;
  NodeGraph graph;
  std::vector<int64_t> node_config_ids;          // convolution, dot and reshape nodes
  std::vector<ConfigurableNode> configurable_nodes;  // with their layout groups, as RegisterGraph lists them
  std::vector<std::string> warnings;
  std::string graph_hash;

  // INVALID_ARGUMENT naming `what` (e.g. the file) for a module that does not parse or is
  // not well formed.
  static absl::StatusOr<HloProgram> FromSerialized(std::string serialized, const std::string& what);
  // The same from a file (e.g. an XLA dump's *.hlo.pb); errors name the file.
  static absl::StatusOr<HloProgram> FromFile(const std::string& path);

  // One configuration row (nc x 18 values) from per-instruction layouts: instruction
  // name -> its tensors' minor-to-major dimension lists (output first, then operands; at
  // most 3 tensors of at most 6 dimensions). Configurable instructions not named keep
  // the compiler's default (-1). INVALID_ARGUMENT for a name that is not a configurable
  // instruction, or a layout that does not fit.
  absl::StatusOr<std::vector<int8_t>> LayoutRow(
      const std::map<std::string, std::vector<std::vector<int64_t>>>& by_instruction) const;
};

class RankerClient {
 public:
  explicit RankerClient(ClientOptions options);
  ~RankerClient();

  // Registers the graph (idempotent); the hash is checked against the local one.
  absl::StatusOr<RegisteredGraph> Register(const NodeGraph& graph, const std::vector<int64_t>& node_config_ids);

  // Registers an HLO module (the server featurizes it); the hash is checked against
  // the local one.
  absl::StatusOr<RegisteredGraph> Register(const HloProgram& program);

  // Ranks layout configs (count x nc x 18 values -1..5) or tile configs (count x 24).
  // The graph is sent only when the server does not know it yet.
  absl::StatusOr<Ranking> RankLayout(const NodeGraph& graph, const std::vector<int64_t>& node_config_ids,
                                     const int8_t* configs, int64_t count, const RankOptions& options);
  // Layout configs for an HLO module's configurable nodes (configurable_nodes order).
  absl::StatusOr<Ranking> RankLayout(const HloProgram& program, const int8_t* configs, int64_t count,
                                     const RankOptions& options);
  absl::StatusOr<Ranking> RankTile(const NodeGraph& graph, const float* configs, int64_t count,
                                   const RankOptions& options);

  // Reports measured runtimes (ns, each > 0) of `count` layout configurations (count x
  // nc x 18 values) of a graph, for the server's measurement store; the graph is
  // registered when the server does not know it. OK means stored durably. An
  // UNAVAILABLE answer is retried like any call, so a report whose answer was lost may
  // be stored twice: repeats are kept, and training uses their median.
  absl::StatusOr<MeasurementReceipt> ReportMeasurements(const NodeGraph& graph,
                                                        const std::vector<int64_t>& node_config_ids,
                                                        const std::string& collection, const int8_t* configs,
                                                        const int64_t* runtimes_ns, int64_t count,
                                                        const std::string& source = "");
  // The same for an HLO program (registered from its module when the server does not
  // know it); rows in its configurable_nodes order.
  absl::StatusOr<MeasurementReceipt> ReportMeasurements(const HloProgram& program, const std::string& collection,
                                                        const int8_t* configs, const int64_t* runtimes_ns,
                                                        int64_t count, const std::string& source = "");

  // Proposes configurations to measure next: a model-guided search of the graph's
  // layout space on the server; the graph is registered when the server does not know it.
  absl::StatusOr<Proposals> Search(const NodeGraph& graph, const std::vector<int64_t>& node_config_ids,
                                   const SearchConfigsOptions& options);
  // The same for an HLO program (registered from its module when the server does not
  // know it, so the search space has its exact operand ranks).
  absl::StatusOr<Proposals> Search(const HloProgram& program, const SearchConfigsOptions& options);

  absl::StatusOr<std::vector<ModelInfo>> ListModels();
  // SERVING, NOT_SERVING, ... of grpc.health.v1 for a health service name:
  // "tgraph.v1.Ranker" (or "") is readiness, "liveness" is liveness (docs/api.md).
  absl::StatusOr<std::string> Health(const std::string& service = "tgraph.v1.Ranker");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tgraph
