// tgraph-client's flags, declared for its subcommands' files (defined in cli_flags.cc,
// each with its help text). Read on the main thread only, after the command line is parsed.
#pragma once

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, server);
ABSL_DECLARE_FLAG(bool, tls);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_server_name);
ABSL_DECLARE_FLAG(std::string, collection);
ABSL_DECLARE_FLAG(std::string, npz);
ABSL_DECLARE_FLAG(std::string, hlo);
ABSL_DECLARE_FLAG(std::string, configs);
ABSL_DECLARE_FLAG(int64_t, top_k);
ABSL_DECLARE_FLAG(int64_t, max_configs);
ABSL_DECLARE_FLAG(int64_t, model_version);
ABSL_DECLARE_FLAG(bool, cascade);
ABSL_DECLARE_FLAG(double, timeout_s);
ABSL_DECLARE_FLAG(double, retry_budget_s);
ABSL_DECLARE_FLAG(std::string, data);
ABSL_DECLARE_FLAG(std::string, split);
ABSL_DECLARE_FLAG(bool, official_subset);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(std::string, rankings);
ABSL_DECLARE_FLAG(int, concurrency);
ABSL_DECLARE_FLAG(int64_t, requests);
ABSL_DECLARE_FLAG(double, duration_s);
ABSL_DECLARE_FLAG(double, rate);
ABSL_DECLARE_FLAG(int64_t, configs_per_request);
ABSL_DECLARE_FLAG(int, graphs);
ABSL_DECLARE_FLAG(std::string, service);
ABSL_DECLARE_FLAG(bool, allow_remote);
ABSL_DECLARE_FLAG(int, rounds);
ABSL_DECLARE_FLAG(int, per_round);
ABSL_DECLARE_FLAG(int, random_orders);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(std::string, csv);
ABSL_DECLARE_FLAG(std::string, finetune_command);
ABSL_DECLARE_FLAG(int64_t, search_evaluations);
ABSL_DECLARE_FLAG(std::string, source);
ABSL_DECLARE_FLAG(std::string, runtimes);
ABSL_DECLARE_FLAG(int64_t, results);
ABSL_DECLARE_FLAG(int64_t, max_evaluations);
ABSL_DECLARE_FLAG(int64_t, max_changed_groups);
ABSL_DECLARE_FLAG(int64_t, start_best);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(bool, force);
ABSL_DECLARE_FLAG(int64_t, per_fusion);
ABSL_DECLARE_FLAG(int64_t, sm_count);
ABSL_DECLARE_FLAG(bool, allow_any_model);
ABSL_DECLARE_FLAG(bool, allow_split_k);
