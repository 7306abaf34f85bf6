// tgraph-client's flags and their help (what --help prints); cli_flags.h declares them.
#include "client/cli_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "Server address HOST:PORT");
ABSL_FLAG(bool, tls, false, "Connect over TLS (implied by any --tls_* flag); the server's certificate is checked "
          "against --tls_ca, else gRPC's default roots");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA bundle the server's certificate must chain to");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate, for a server that requires one (mutual TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_server_name, "",
          "The name the server's certificate must carry, when it is not --server's host (e.g. connecting by IP)");
ABSL_FLAG(std::string, collection, "", "Collection, e.g. layout:xla:random");
ABSL_FLAG(std::string, npz, "", "A graph file in the TpuGraphs format");
ABSL_FLAG(std::string, hlo, "",
          "rank, register, search, report, xla-gpu: an XLA HLO module: its text (an XLA dump's *.txt) or proto "
          "(xla.HloProto, e.g. *.hlo.pb, or HloModuleProto)");
ABSL_FLAG(std::string, configs, "",
          "rank: layout rows to rank, .npy or .npz (node_config_feat), shape (c, nc, 18) or (nc, 18), values -1..5; "
          "needed with --hlo, replaces an --npz file's own configurations");
ABSL_FLAG(int64_t, top_k, 10, "How many of the fastest configurations to print");
ABSL_FLAG(int64_t, max_configs, 0, "Rank only the first N configurations of the file (0 = all)");
ABSL_FLAG(int64_t, model_version, 0, "Model version (0 = latest)");
ABSL_FLAG(bool, cascade, false,
          "rank: the top-k cascade: every configuration scored by one fold, the best by every fold (needs --top_k)");
ABSL_FLAG(double, timeout_s, 60, "Deadline of each RPC");
ABSL_FLAG(double, retry_budget_s, 30,
          "How long UNAVAILABLE (no server, a restart) is retried with backoff, in all (0 = no retries)");
ABSL_FLAG(std::string, data, "", "eval: dataset root");
ABSL_FLAG(std::string, split, "valid", "eval: train, valid or test");
ABSL_FLAG(bool, official_subset, false, "eval: layout graphs scored on the 1,000-config evaluation subset");
ABSL_FLAG(bool, json, false, "rank, register, report, eval, bench, search, health, models: print JSON instead of text");
ABSL_FLAG(std::string, rankings, "",
          "eval: also write each graph's ranking (the file's configuration indices, fastest first) to this CSV");
ABSL_FLAG(int, concurrency, 4, "bench: concurrent requests");
ABSL_FLAG(int64_t, requests, 200, "bench: stop after this many requests (0 = no limit)");
ABSL_FLAG(double, duration_s, 60, "bench: stop after this many seconds (0 = no limit)");
ABSL_FLAG(double, rate, 0, "bench: target requests per second (0 = as fast as possible)");
ABSL_FLAG(int64_t, configs_per_request, 128, "bench: configurations per request");
ABSL_FLAG(int, graphs, 8, "bench: graphs in the pool");
ABSL_FLAG(std::string, service, "tgraph.v1.Ranker", "health: the health service name (\"liveness\" for liveness)");
ABSL_FLAG(bool, allow_remote, false, "bench: allow a non-loopback target");
ABSL_FLAG(int, rounds, 10, "replay: measurement rounds");
ABSL_FLAG(int, per_round, 10, "replay: configurations measured per round");
ABSL_FLAG(int, random_orders, 20, "replay: random search is the mean over this many random orders");
ABSL_FLAG(uint64_t, seed, 0, "replay: seed of the random orders; search: the search's seed");
ABSL_FLAG(std::string, csv, "", "replay: also write the curves as CSV to this file");
ABSL_FLAG(std::string, finetune_command, "",
          "replay: the model with updates: report each round's measurements, run this command (e.g. tgraph-train "
          "finetune ...), wait for the version it publishes, rank again");
ABSL_FLAG(int64_t, search_evaluations, 0,
          "replay: also a model-guided search within the file's configurations (SearchConfigs with them as candidates), "
          "this many model evaluations per round (0 = none)");
ABSL_FLAG(std::string, source, "", "report: a label stored with the measurements (e.g. the farm and hardware)");
ABSL_FLAG(std::string, runtimes, "",
          "report --hlo: the measured runtimes (ns) of the --configs rows, in their order; search --hlo: of the "
          "--measured rows: an .npy of shape (c,), or text, numbers separated by spaces, commas or newlines");
ABSL_FLAG(std::string, measured, "",
          "search --hlo: the rows measured so far (.npy or .npz, as --configs): never proposed again, the fastest "
          "--start_best started from, and with --runtimes the scores corrected by them");
ABSL_FLAG(bool, stored, true,
          "search (layouts): the rows the server's measurement store holds of the graph (report) are never proposed "
          "again and their runtimes correct the scores, beside --measured or the file's own rows (--stored=false: "
          "those only)");
ABSL_FLAG(std::string, reference, "",
          "rank: the reference to score against (.npy or .npz rows, as --configs), e.g. the PROPOSED.reference.npy "
          "search --out writes: its scores repeated, before any measured correction (a search after measurements "
          "adds one)");
ABSL_FLAG(int64_t, results, 0, "search: configurations to propose (0: the server's default)");
ABSL_FLAG(int64_t, max_evaluations, 0,
          "search: configurations the search's fitness model may score (0: the server's default; the answer says "
          "how many it scored)");
ABSL_FLAG(int64_t, max_changed_groups, 0,
          "search, replay --search_evaluations: the most layout groups a proposal may change from the default and the "
          "measured rows it starts from (0: the server's default; -1: the whole space)");
ABSL_FLAG(int64_t, start_best, 16,
          "search: start from the file's this many fastest measured configurations (0: none); every configuration of "
          "the file is excluded (it was measured)");
ABSL_FLAG(std::string, out, "",
          "search: write the proposed rows, (results, nc, 18) int8, to this .npy file, and the reference they were "
          "scored against beside it (NAME.reference.npy: rank --reference); xla-gpu: the candidate list for XLA "
          "(protobuf text)");
ABSL_FLAG(bool, force, false, "search, xla-gpu: replace --out when it exists (never a link or a device)");
ABSL_FLAG(int64_t, per_fusion, 3, "xla-gpu: how many of each fusion's best configurations the candidate list holds");
ABSL_FLAG(int64_t, sm_count, 132, "xla-gpu: the GPU's streaming multiprocessors (132 on an H100 or H200 SXM)");
ABSL_FLAG(bool, allow_split_k, false,
          "xla-gpu: list configurations with split_k above 1 (an XLA whose Triton autotuner still takes them; newer "
          "ones refuse them)");
ABSL_FLAG(bool, allow_any_model, false,
          "xla-gpu: rank with --collection even when it is not a model of XLA's GPU fusions or a Triton tile model "
          "(a warning says why it does not fit)");
