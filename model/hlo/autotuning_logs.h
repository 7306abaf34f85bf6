// XLA's autotuning logs (--xla_gpu_dump_autotune_logs_to: an xla.AutotuningLogs, binary,
// or protobuf text when the file name ends in .txt or .textproto) read as each fusion's
// tried candidates: the Triton GEMM configurations that ran and their times, how many
// failed (did not compile, spilled, gave a wrong result), and the fastest library
// (cuBLAS) candidate when one was tried. A fusion is named by the log's fusion_name, or
// else by the name of the instruction the log packs.
//
// Torch-free; pure functions of their arguments, callable from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/tile/xla_gemm.h"

namespace tgraph::hlo {

struct TriedConfig {
  XlaGemmConfig config;
  int64_t run_time_ns = 0;
};

struct FusionLog {
  std::string fusion;               // the fusion instruction's name
  std::vector<TriedConfig> triton;  // the Triton candidates that ran, in the log's order
  int64_t failed = 0;               // candidates of any backend that failed
  std::optional<int64_t> library_ns;  // the fastest library candidate that ran
  std::string selected_backend;     // what the log says XLA chose ("" when it does not)
  std::string compute_capability;   // "9.0"; "" when the log does not say
};

// `bytes` as AutotuningLogs: text when it starts (after whitespace and '#' comments) with
// a field name, else binary. INVALID_ARGUMENT naming `what`, and the log by index, for
// bytes that are neither, a log that names no fusion, or a run time that is negative.
absl::StatusOr<std::vector<FusionLog>> ReadAutotuningLogs(absl::string_view bytes, absl::string_view what);

}  // namespace tgraph::hlo
