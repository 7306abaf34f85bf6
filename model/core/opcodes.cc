#include "model/core/opcodes.h"

#include <array>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tgraph {
namespace {

// docs/format.md "HLO opcode ids": id i is kOpcodeNames[i - 1].
constexpr std::array<const char*, 120> kOpcodeNames = {
    "abs", "add", "add-dependency", "after-all", "all-reduce", "all-to-all", "atan2", "batch-norm-grad",
    "batch-norm-inference", "batch-norm-training", "bitcast", "bitcast-convert", "broadcast", "call", "ceil",
    "cholesky", "clamp", "collective-permute", "count-leading-zeros", "compare", "complex", "concatenate",
    "conditional", "constant", "convert", "convolution", "copy", "copy-done", "copy-start", "cosine",
    "custom-call", "divide", "domain", "dot", "dynamic-slice", "dynamic-update-slice", "exponential",
    "exponential-minus-one", "fft", "floor", "fusion", "gather", "get-dimension-size", "set-dimension-size",
    "get-tuple-element", "imag", "infeed", "iota", "is-finite", "log", "log-plus-one", "and", "not", "or", "xor",
    "map", "maximum", "minimum", "multiply", "negate", "outfeed", "pad", "parameter", "partition-id", "popcnt",
    "power", "real", "recv", "recv-done", "reduce", "reduce-precision", "reduce-window", "remainder",
    "replica-id", "reshape", "reverse", "rng", "rng-get-and-update-state", "rng-bit-generator",
    "round-nearest-afz", "rsqrt", "scatter", "select", "select-and-scatter", "send", "send-done", "shift-left",
    "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "slice", "sort", "sqrt", "subtract", "tanh",
    "trace", "transpose", "triangular-solve", "tuple", "tuple-select", "while", "cbrt", "all-gather",
    "collective-permute-start", "collective-permute-done", "logistic", "dynamic-reshape", "all-reduce-start",
    "all-reduce-done", "reduce-scatter", "all-gather-start", "all-gather-done", "opt-barrier", "async-start",
    "async-update", "async-done", "round-nearest-even", "stochastic-convert", "tan"};

// XLA's opcodes outside the table (its HLO opcode list as of 2026; names are facts).
constexpr std::array<const char*, 18> kLaterXlaOpcodes = {
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "collective-broadcast", "collective-reduce", "cosh",
    "erf", "mulhi", "ragged-all-to-all", "ragged-dot", "scaled-dot", "scan", "shuffle", "sinh", "topk"};

}  // namespace

bool IsXlaOpcode(absl::string_view name) {
  const auto known = [](absl::string_view n) {
    if (OpcodeId(n) != 0) return true;
    for (const char* later : kLaterXlaOpcodes)
      if (n == later) return true;
    return false;
  };
  if (known(name)) return true;
  // XLA writes an asynchronous operation as its wrapped opcode with -start, -update or
  // -done ("all-to-all-start", "custom-call-done"), and reads it back so.
  for (absl::string_view suffix : {"-start", "-update", "-done"})
    if (absl::ConsumeSuffix(&name, suffix)) return known(name);
  return false;
}

int OpcodeId(absl::string_view name) {
  static const auto* ids = [] {
    auto* m = new std::unordered_map<std::string, int>();
    for (size_t i = 0; i < kOpcodeNames.size(); ++i) (*m)[kOpcodeNames[i]] = static_cast<int>(i) + 1;
    return m;
  }();
  auto it = ids->find(std::string(name));
  return it == ids->end() ? 0 : it->second;
}

absl::string_view OpcodeName(int id) {
  if (id < 1 || id > static_cast<int>(kOpcodeNames.size())) return "";
  return kOpcodeNames[static_cast<size_t>(id) - 1];
}

std::string OpcodeLabel(int id) {
  const absl::string_view name = OpcodeName(id);
  return name.empty() ? absl::StrCat("opcode ", id) : std::string(name);
}

}  // namespace tgraph
