#include "model/tile/xla_fusion_table.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "model/core/file_util.h"

namespace tgraph {
namespace {

constexpr const char* kColumns[] = {
    "fusion",     "computation", "kind",      "dot",          "dot_node",   "nodes",          "batch",
    "m",          "n",           "k",         "lhs_dtype",    "rhs_dtype",  "out_dtype",      "lhs_transposed",
    "rhs_transposed", "chosen",  "block_m",   "block_n",      "block_k",    "split_k",        "num_stages",
    "num_warps",  "num_ctas",    "measured",  "failed",       "fastest_ns", "library_ns",     "file"};
constexpr size_t kNumColumns = sizeof(kColumns) / sizeof(kColumns[0]);

std::string Optional(const std::optional<int64_t>& v) { return v ? absl::StrCat(*v) : ""; }

// Reads one line's fields into a record, each error naming the line and the column.
class LineReader {
 public:
  LineReader(const std::vector<absl::string_view>& fields, std::string where) : f_(fields), where_(std::move(where)) {}

  absl::Status Error(size_t col, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": ", kColumns[col], ": ", message));
  }
  std::string Text(size_t col) const { return std::string(f_[col]); }
  // An integer in [lo, 2^40].
  absl::Status Int(size_t col, int64_t lo, int64_t* out) const {
    if (!absl::SimpleAtoi(f_[col], out) || *out < lo || *out > (int64_t{1} << 40))
      return Error(col, absl::StrCat("'", f_[col], "' is not an integer of at least ", lo));
    return absl::OkStatus();
  }
  absl::Status Flag(size_t col, bool* out) const {
    if (f_[col] != "0" && f_[col] != "1") return Error(col, absl::StrCat("'", f_[col], "' is not 0 or 1"));
    *out = f_[col] == "1";
    return absl::OkStatus();
  }
  // Empty (not known) or a positive integer.
  absl::Status MaybeInt(size_t col, std::optional<int64_t>* out) const {
    if (f_[col].empty()) return absl::OkStatus();
    int64_t v = 0;
    if (absl::Status s = Int(col, 1, &v); !s.ok()) return s;
    *out = v;
    return absl::OkStatus();
  }

 private:
  const std::vector<absl::string_view>& f_;
  std::string where_;
};

absl::StatusOr<XlaFusionRecord> ParseLine(const LineReader& in) {
  XlaFusionRecord r;
  r.fusion = in.Text(0), r.computation = in.Text(1), r.kind = in.Text(2), r.dot = in.Text(3);
  XlaGemmProblem& p = r.problem;
  XlaGemmConfig& c = r.chosen;
  p.lhs_dtype = in.Text(10), p.rhs_dtype = in.Text(11), p.out_dtype = in.Text(12);
  r.file = in.Text(27);
  struct IntField {
    size_t col;
    int64_t lo;
    int64_t* out;
  };
  for (const IntField& f : {IntField{4, -1, &r.dot_node}, {5, 1, &r.nodes}, {6, 1, &p.batch}, {7, 1, &p.m},
                            {8, 1, &p.n}, {9, 1, &p.k}, {16, 1, &c.block_m}, {17, 1, &c.block_n}, {18, 1, &c.block_k},
                            {19, 1, &c.split_k}, {20, 1, &c.num_stages}, {21, 1, &c.num_warps}, {22, 1, &c.num_ctas},
                            {23, 0, &r.measured}, {24, 0, &r.failed}})
    if (absl::Status s = in.Int(f.col, f.lo, f.out); !s.ok()) return s;
  if (absl::Status s = in.Flag(13, &p.lhs_transposed); !s.ok()) return s;
  if (absl::Status s = in.Flag(14, &p.rhs_transposed); !s.ok()) return s;
  if (absl::Status s = in.MaybeInt(25, &r.fastest_ns); !s.ok()) return s;
  if (absl::Status s = in.MaybeInt(26, &r.library_ns); !s.ok()) return s;
  for (size_t col : {0, 10, 11, 12, 27})
    if (in.Text(col).empty()) return in.Error(col, "is empty");
  if (in.Text(15) != c.Name())
    return in.Error(15, absl::StrCat("'", in.Text(15), "' is not the configuration of the block columns (", c.Name(), ")"));
  if (!absl::EndsWith(r.file, ".npz")) return in.Error(27, absl::StrCat("'", r.file, "' is not an .npz file name"));
  return r;
}

}  // namespace

std::string XlaFusionTableHeader() { return absl::StrJoin(kColumns, "\t"); }

std::string XlaFusionTableLine(const XlaFusionRecord& r) {
  const XlaGemmProblem& p = r.problem;
  const XlaGemmConfig& c = r.chosen;
  return absl::StrJoin(
      {r.fusion, r.computation, r.kind, r.dot, absl::StrCat(r.dot_node), absl::StrCat(r.nodes), absl::StrCat(p.batch),
       absl::StrCat(p.m), absl::StrCat(p.n), absl::StrCat(p.k), p.lhs_dtype, p.rhs_dtype, p.out_dtype,
       std::string(p.lhs_transposed ? "1" : "0"), std::string(p.rhs_transposed ? "1" : "0"), c.Name(),
       absl::StrCat(c.block_m), absl::StrCat(c.block_n), absl::StrCat(c.block_k), absl::StrCat(c.split_k),
       absl::StrCat(c.num_stages), absl::StrCat(c.num_warps), absl::StrCat(c.num_ctas), absl::StrCat(r.measured),
       absl::StrCat(r.failed), Optional(r.fastest_ns), Optional(r.library_ns), r.file},
      "\t");
}

absl::StatusOr<std::vector<XlaFusionRecord>> ParseXlaFusionTable(const std::string& text, absl::string_view what) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.empty() || absl::StripSuffix(lines[0], "\r") != XlaFusionTableHeader())
    return absl::InvalidArgumentError(
        absl::StrCat(what, ":1: the header is not a fusion table's (", XlaFusionTableHeader(), ")"));
  std::vector<XlaFusionRecord> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (absl::StartsWith(lines[i], "#")) continue;  // a comment: a fusion the writer could not read
    const std::vector<absl::string_view> fields = absl::StrSplit(absl::StripSuffix(lines[i], "\r"), '\t');
    const std::string where = absl::StrCat(what, ":", i + 1);
    if (fields.size() != kNumColumns)
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": has ", fields.size(), " fields, expected ", kNumColumns, " (tab-separated)"));
    absl::StatusOr<XlaFusionRecord> r = ParseLine(LineReader(fields, where));
    if (!r.ok()) return r.status();
    out.push_back(std::move(*r));
  }
  return out;
}

bool IsXlaFusionTableName(absl::string_view file_name) {
  return file_name == "fusions.tsv" || absl::EndsWith(file_name, ".fusions.tsv");
}

absl::StatusOr<std::map<std::string, XlaFusionRecord>> ReadXlaFusionTables(const std::string& dir) {
  namespace fs = std::filesystem;
  std::map<std::string, XlaFusionRecord> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": cannot list: ", ec.message()));
  std::vector<std::string> tables;
  for (const fs::directory_entry& e : it)
    if (IsXlaFusionTableName(e.path().filename().string())) tables.push_back(e.path().string());
  std::sort(tables.begin(), tables.end());
  for (const std::string& path : tables) {
    absl::StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) return text.status();
    absl::StatusOr<std::vector<XlaFusionRecord>> records = ParseXlaFusionTable(*text, path);
    if (!records.ok()) return records.status();
    for (XlaFusionRecord& r : *records) {
      const std::string file = r.file;
      if (!out.emplace(file, std::move(r)).second)
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", file, " is listed by two fusion tables' lines"));
    }
  }
  return out;
}

}  // namespace tgraph
