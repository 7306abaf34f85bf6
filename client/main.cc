// tgraph-client: talks to tgraph-server.
//
//   tgraph-client rank --server H:P --collection C --npz FILE [--top_k K] [--max_configs N]
//   tgraph-client rank --server H:P --collection C (--hlo MODULE.hlo.pb | --npz GRAPH.npz) --configs ROWS.npy
//   tgraph-client register --server H:P (--hlo MODULE.hlo.pb | --npz GRAPH.npz)
//   tgraph-client report --server H:P --collection C (--npz FILE | --hlo MODULE --configs ROWS.npy --runtimes FILE)
//   tgraph-client eval --server H:P --collection C --data ROOT --split valid [--official_subset] [--json]
//                      [--rankings OUT.csv]
//   tgraph-client bench --server H:P --collection C --data ROOT [--concurrency 4] [--requests 200]
//                       [--duration_s 60] [--rate 0] [--configs_per_request 128] [--json]
//   tgraph-client health --server H:P [--service liveness]
//   tgraph-client models --server H:P
//   tgraph-client xla-gpu --server H:P --collection tile@NAME --hlo MODULE --out OVERRIDE.textproto [--per_fusion 3]
// --json on rank, register, report, eval, bench, health and models prints JSON instead
// of text. Exit status: 0 success (health: SERVING), 2 usage error, 1 anything else.
// Each subcommand is a file of its own (client/cli_commands.h); this file picks one.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli_commands.h"
#include "client/client.h"
#include "model/tools/tool.h"

namespace {

using tgraph::Fail;
using tgraph::UsageError;

int RunCommand(const std::string& cmd) {
  absl::StatusOr<tgraph::ClientOptions> co = tgraph::cli::ClientOptionsFromFlags();
  if (!co.ok()) return Fail(co.status());
  tgraph::RankerClient client(*co);
  if (cmd == "rank") return tgraph::cli::Rank(client);
  if (cmd == "register") return tgraph::cli::Register(client);
  if (cmd == "eval") return tgraph::cli::Eval(client);
  if (cmd == "report") return tgraph::cli::Report(client);
  if (cmd == "replay") return tgraph::cli::Replay(*co);
  if (cmd == "bench") return tgraph::cli::Bench(*co);
  if (cmd == "health") return tgraph::cli::Health(*co);
  if (cmd == "models") return tgraph::cli::Models(client);
  if (cmd == "search") return tgraph::cli::Search(client);
  if (cmd == "xla-gpu") return tgraph::cli::XlaGpu(client);
  return Fail(UsageError(absl::StrCat(
      "unknown command '", cmd, "'; expected rank, register, report, replay, eval, bench, search, xla-gpu, health or models")));
}


}  // namespace

int main(int argc, char** argv) {
  const std::vector<char*> args = tgraph::ParseToolCommandLine(argc, argv,
      "Client of tgraph-server.\n"
      "  tgraph-client rank --server H:P --collection C --npz FILE [--top_k K] [--max_configs N]\n"
      "  tgraph-client rank --server H:P --collection C (--hlo MODULE | --npz GRAPH.npz) --configs ROWS.npy\n"
      "                     [--reference PROPOSED.reference.npy]\n"
      "  tgraph-client register --server H:P (--hlo MODULE | --npz GRAPH.npz)\n"
      "  tgraph-client eval --server H:P --collection C --data ROOT --split valid [--official_subset] [--json]\n"
      "  tgraph-client bench --server H:P --collection C --data ROOT [--concurrency N] [--requests N] [--rate R]\n"
      "  tgraph-client report --server H:P --collection C --npz FILE [--max_configs N] [--source TEXT]\n"
      "  tgraph-client report --server H:P --collection C --hlo MODULE --configs ROWS.npy --runtimes FILE [--source TEXT]\n"
      "  tgraph-client replay --server H:P --collection C --npz MEASURED.npz [--rounds R] [--per_round K] [--csv OUT]\n"
      "                       [--finetune_command 'tgraph-train finetune ...'] [--search_evaluations N]\n"
      "                       [--max_changed_groups G]\n"
      "  tgraph-client search --server H:P --collection C (--npz MEASURED.npz | --hlo MODULE) [--results 10]\n"
      "                       [--max_evaluations N] [--max_changed_groups G]\n"
      "                       [--seed S] [--out PROPOSED.npy] [--measured ROWS.npy [--runtimes NS.txt]]\n"
      "                       [--stored=false]   (the server's stored measurements of the graph join by default)\n"
      "  tgraph-client xla-gpu --server H:P [--collection tile@NAME] --hlo MODULE --out OVERRIDE.textproto\n"
      "                        [--per_fusion 3] [--sm_count 132] [--allow_split_k] [--allow_any_model]\n"
      "      a module after XLA's GPU passes -> the shortlist XLA's autotuner measures instead of its space:\n"
      "      each Triton GEMM fusion's own XLA choice and the model's best configurations (without a fusion\n"
      "      model, the GPU's Triton tile model's), and the XLA_FLAGS to set\n"
      "  tgraph-client health --server H:P [--service liveness]\n"
      "  tgraph-client models --server H:P\n"
      "MODULE: an XLA HLO module, its text (*.txt) or proto (*.hlo.pb).\n"
      "--json prints JSON (rank, register, report, search, eval, bench, health, models).\n"
      "--tls, --tls_ca CA.pem [--tls_cert C.pem --tls_key K.pem] connect over TLS (mutual TLS with a certificate).");
  if (args.size() != 2)
    return Fail(UsageError("give one command: rank, register, report, replay, eval, bench, search, xla-gpu, health or models"));
  return RunCommand(args[1]);
}

