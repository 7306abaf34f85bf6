// tgraph-client: what the subcommands share (flags parsed, JSON printed, programs read).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/cli_commands.h"
#include "client/cli_flags.h"
#include "client/client.h"
#include "model/core/dataset.h"
#include "model/core/graph_io.h"
#include "model/tools/tool.h"

namespace tgraph::cli {

int PrintJson(const nlohmann::json& j) {
  std::printf("%s\n", j.dump(1).c_str());
  return tgraph::kExitOk;
}

// --collection, parsed; a usage error names the flag.
absl::StatusOr<tgraph::Collection> CollectionFlag() {
  absl::StatusOr<tgraph::Collection> c = tgraph::ParseCollection(absl::GetFlag(FLAGS_collection));
  if (!c.ok()) return UsageError(absl::StrCat("--collection: ", c.status().message()));
  return c;
}

// The configuration rows of --configs for a graph of nc configurable nodes, cut to
// --max_configs; runtimes unknown (0).
absl::StatusOr<tgraph::LayoutConfigRows> ConfigsFlag(int64_t nc) {
  absl::StatusOr<tgraph::LayoutConfigRows> rows = tgraph::LoadLayoutConfigRows(absl::GetFlag(FLAGS_configs), nc);
  if (!rows.ok()) return rows.status();
  const int64_t max = absl::GetFlag(FLAGS_max_configs);
  if (max > 0 && rows->count > max) {
    rows->count = max;
    rows->values.resize(static_cast<size_t>(max * nc * tgraph::kConfigFeatDim));
  }
  return rows;
}

// The --hlo module, its featurization's warnings (e.g. a module dumped after XLA's
// passes) on stderr.
absl::StatusOr<tgraph::HloProgram> ReadProgram(const std::string& path) {
  absl::StatusOr<tgraph::HloProgram> p = tgraph::HloProgram::FromFile(path);
  if (p.ok())
    for (const std::string& w : p->warnings) std::fprintf(stderr, "tgraph-client: warning: %s\n", w.c_str());
  return p;
}

absl::StatusOr<tgraph::ClientOptions> ClientOptionsFromFlags() {
  tgraph::ClientOptions co;
  co.target = absl::GetFlag(FLAGS_server);
  co.timeout_s = absl::GetFlag(FLAGS_timeout_s);
  co.retry_budget_s = absl::GetFlag(FLAGS_retry_budget_s);
  if (absl::GetFlag(FLAGS_tls) || !absl::GetFlag(FLAGS_tls_ca).empty() || !absl::GetFlag(FLAGS_tls_cert).empty() ||
      !absl::GetFlag(FLAGS_tls_key).empty() || !absl::GetFlag(FLAGS_tls_server_name).empty()) {
    absl::StatusOr<tgraph::ClientTlsOptions> tls =
        tgraph::TlsFromFiles(absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                             absl::GetFlag(FLAGS_tls_server_name));
    if (!tls.ok()) return UsageError(tls.status().message());
    co.tls = std::move(*tls);
  }
  return co;
}

}  // namespace tgraph::cli
