#include "model/hlo/autotuning_logs.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "model/hlo/featurize.h"
#include "tgraph/hlo/autotuning.pb.h"
#include "tgraph/hlo/hlo.pb.h"

namespace tgraph::hlo {

namespace {

using tgraph::xla::AutotuneResult;
using tgraph::xla::AutotuningLog;
using tgraph::xla::AutotuningLogs;

// Text format starts with a field name (`logs {`), after whitespace and comments, and has
// no control characters; a binary message has them (its tags and lengths), even where
// its first byte (0x0a, field 1's tag) reads as a newline.
bool LooksLikeText(absl::string_view bytes) {
  for (const char c : bytes.substr(0, 4096)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u == 0x7f || (u < 0x20 && u != '\t' && u != '\n' && u != '\r')) return false;
  }
  size_t i = 0;
  while (i < bytes.size()) {
    const char c = bytes[i];
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '#') {
      while (i < bytes.size() && bytes[i] != '\n') ++i;
    } else {
      return absl::ascii_isalpha(static_cast<unsigned char>(c));
    }
  }
  return false;
}

XlaGemmConfig ConfigOf(const tgraph::xla::TritonGemmKey& k) {
  XlaGemmConfig c;
  c.block_m = k.block_m();
  c.block_n = k.block_n();
  c.block_k = k.block_k();
  c.split_k = std::max<int64_t>(k.split_k(), 1);
  c.num_stages = k.num_stages();
  c.num_warps = k.num_warps();
  c.num_ctas = std::max<int64_t>(k.num_ctas(), 1);
  return c;
}

// The Triton configuration a result tried: its `triton` key, or another backend's key
// that packs one (the newer autotuner's BackendConfigKey).
std::optional<XlaGemmConfig> TritonOf(const AutotuneResult& r) {
  if (r.has_triton()) return ConfigOf(r.triton());
  if (r.has_other() && absl::EndsWith(r.other().config().type_url(), "TritonGemmKey")) {
    tgraph::xla::TritonGemmKey k;
    if (k.ParseFromString(r.other().config().value())) return ConfigOf(k);
  }
  return std::nullopt;
}

bool Plausible(const XlaGemmConfig& c) {
  for (int64_t v : {c.block_m, c.block_n, c.block_k, c.split_k, c.num_stages, c.num_warps, c.num_ctas})
    if (v <= 0 || v > 65536) return false;
  return true;
}

absl::StatusOr<FusionLog> ReadLog(const AutotuningLog& log, size_t index, absl::string_view what) {
  const std::string where = absl::StrCat(what, ": log ", index);
  FusionLog out;
  out.fusion = ShownName(log.fusion_name());
  if (out.fusion.empty() && absl::EndsWith(log.instr().type_url(), "HloInstructionProto")) {
    tgraph::xla::HloInstructionProto inst;
    if (inst.ParseFromString(log.instr().value())) out.fusion = ShownName(inst.name());
  }
  if (out.fusion.empty())
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": names no fusion (no fusion_name, and no instruction packed in instr)"));
  out.selected_backend = ShownName(log.selected_backend());
  if (log.has_compute_capability())
    out.compute_capability = absl::StrCat(log.compute_capability().major(), ".", log.compute_capability().minor());
  for (int i = 0; i < log.results_size(); ++i) {
    const AutotuneResult& r = log.results(i);
    if (r.has_failure()) {
      ++out.failed;
      continue;
    }
    const int64_t seconds = r.run_time().seconds(), nanos = r.run_time().nanos();
    if (seconds < 0 || nanos < 0 || seconds > 86400)
      return absl::InvalidArgumentError(absl::StrCat(where, ": result ", i, ": run_time ", seconds, " s ", nanos,
                                                     " ns is not a time (0 s to a day)"));
    const int64_t ns = seconds * 1000000000 + nanos;
    if (std::optional<XlaGemmConfig> c = TritonOf(r)) {
      if (!Plausible(*c))
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": result ", i, ": Triton configuration ", c->Name(), " has a value outside 1..65536"));
      out.triton.push_back({*c, ns});
    } else if (r.has_gemm()) {
      out.library_ns = out.library_ns ? std::min(*out.library_ns, ns) : ns;
    }
  }
  return out;
}

// Past a quoted string starting at text[i] (its quote): the index after its closing quote.
size_t SkipString(const std::string& text, size_t i) {
  const char quote = text[i++];
  while (i < text.size() && text[i] != quote) i += text[i] == '\\' ? 2 : 1;
  return std::min(i + 1, text.size());
}

// Past a balanced {...} or <...> group starting at text[i]; npos when it never closes.
size_t SkipGroup(const std::string& text, size_t i) {
  int depth = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"' || c == '\'') {
      i = SkipString(text, i);
      continue;
    }
    if (c == '{' || c == '<') ++depth;
    if ((c == '}' || c == '>') && --depth == 0) return i + 1;
    ++i;
  }
  return std::string::npos;
}

// The first `name: "..."` at the top level of the group text[open, end).
std::string TopLevelName(const std::string& text, size_t open, size_t end) {
  int depth = 0;
  for (size_t j = open; j < end; ++j) {
    const char c = text[j];
    if (c == '"' || c == '\'') {
      j = SkipString(text, j) - 1;
      continue;
    }
    if (c == '{' || c == '<') ++depth;
    if (c == '}' || c == '>') --depth;
    const bool word_start = j == 0 || !(absl::ascii_isalnum(static_cast<unsigned char>(text[j - 1])) || text[j - 1] == '_');
    if (depth != 1 || !word_start || text.compare(j, 4, "name") != 0) continue;
    const size_t colon = text.find_first_not_of(" \t", j + 4);
    if (colon == std::string::npos || text[colon] != ':') continue;
    const size_t q = text.find_first_not_of(" \t", colon + 1);
    if (q == std::string::npos || q >= end || text[q] != '"') continue;
    const size_t after = SkipString(text, q);
    std::string name;
    return absl::CUnescape(text.substr(q + 1, after - q - 2), &name) ? name : "";
  }
  return "";
}

// XLA writes an Any expanded (`[type.googleapis.com/xla.HloInstructionProto] { name: "f"
// ... }`), which the text parser reads only into a google.protobuf.Any of a type it
// knows. Each expanded Any becomes the fields of ours: its type URL, and as value an
// instruction holding only the name the expansion gives at its top level (all the reader
// takes of it). The expansion's line breaks are kept, so every later line stays where it
// was for the parser's messages.
std::string ExpandedAnysAsFields(std::string text) {
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"' || c == '\'') {
      i = SkipString(text, i);
      continue;
    }
    if (c == '#') {
      i = std::min(text.find('\n', i), text.size());
      continue;
    }
    const size_t close = c == '[' ? text.find(']', i) : std::string::npos;
    if (close == std::string::npos || text.find('/', i) > close) {
      ++i;
      continue;
    }
    const size_t open = text.find_first_not_of(" \t\r\n:", close + 1);
    const size_t end = open == std::string::npos ? std::string::npos : SkipGroup(text, open);
    if (end == std::string::npos) break;  // left for the parser to refuse, at its line
    tgraph::xla::HloInstructionProto inst;
    inst.set_name(TopLevelName(text, open, end));
    const std::string fields = absl::StrCat("type_url: \"", absl::CEscape(text.substr(i + 1, close - i - 1)),
                                            "\" value: \"", absl::CEscape(inst.SerializeAsString()), "\"");
    const size_t breaks = static_cast<size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(i),
                                                         text.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
    text.replace(i, end - i, fields + std::string(breaks, '\n'));
    i += fields.size() + breaks;
  }
  return text;
}

// The text parser's first error, kept for the message instead of logged.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (error.empty()) error = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  std::string error;
};

}  // namespace

absl::StatusOr<std::vector<FusionLog>> ReadAutotuningLogs(absl::string_view bytes, absl::string_view what) {
  AutotuningLogs logs;
  if (LooksLikeText(bytes)) {
    google::protobuf::TextFormat::Parser parser;
    FirstError errors;
    parser.RecordErrorsTo(&errors);
    parser.AllowUnknownField(true);      // the fields tgraph does not read
    parser.AllowUnknownExtension(true);  // an Any written expanded: [type.googleapis.com/...] { ... }
    if (!parser.ParseFromString(ExpandedAnysAsFields(std::string(bytes)), &logs))
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", errors.error, " (not an xla.AutotuningLogs in protobuf text format, as XLA writes it when "
          "--xla_gpu_dump_autotune_logs_to ends in .txt or .textproto)"));
  } else if (!logs.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a serialized xla.AutotuningLogs"));
  }
  std::vector<FusionLog> out;
  for (int i = 0; i < logs.logs_size(); ++i) {
    absl::StatusOr<FusionLog> f = ReadLog(logs.logs(i), static_cast<size_t>(i), what);
    if (!f.ok()) return f.status();
    out.push_back(std::move(*f));
  }
  return out;
}

}  // namespace tgraph::hlo
