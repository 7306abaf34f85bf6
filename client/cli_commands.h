// tgraph-client's subcommands, one file each (cli_rank.cc, cli_search.cc,
// cli_register.cc: register and eval, cli_report.cc, cli_service.cc: replay, bench,
// health, models; cli_xla_gpu.cc), and what they share (cli_common.cc). Each reads its flags
// (cli_flags.h) and returns the tool's exit status: 0 success, 2 usage error, 1 anything
// else (model/tools/tool.h). Run on the main thread.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "model/core/dataset.h"
#include "model/core/graph_io.h"

namespace tgraph::cli {

int Rank(RankerClient& client);
int Search(RankerClient& client);
int Register(RankerClient& client);
int Eval(RankerClient& client);
int Report(RankerClient& client);
int Replay(const ClientOptions& co);
int Bench(const ClientOptions& co);
int Health(ClientOptions co);
int Models(RankerClient& client);
int XlaGpu(RankerClient& client);

// What they share.
int PrintJson(const nlohmann::json& j);
// --collection, parsed; a usage error names the flag.
absl::StatusOr<Collection> CollectionFlag();
// The configuration rows of --configs for a graph of nc configurable nodes, cut to
// --max_configs; runtimes unknown (0).
absl::StatusOr<LayoutConfigRows> ConfigsFlag(int64_t nc);
// The --hlo module, its featurization's warnings (e.g. a module dumped after XLA's
// passes) on stderr.
absl::StatusOr<HloProgram> ReadProgram(const std::string& path);
// The connection flags: the server, deadlines, retries and TLS.
absl::StatusOr<ClientOptions> ClientOptionsFromFlags();

}  // namespace tgraph::cli
