#include "model/tile/tile_orders.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "model/core/eval_report.h"
#include "model/core/file_util.h"

namespace tgraph {

absl::StatusOr<ExternalTileOrders> ParseTileOrders(absl::string_view text, absl::string_view what) {
  ExternalTileOrders out;
  std::map<std::string, std::set<TritonTile>> seen;
  int64_t line_no = 0;
  const auto error = [&](const std::string& message) {
    return absl::InvalidArgumentError(absl::StrCat(what, ":", line_no, ": ", message));
  };
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripSuffix(line, "\r");
    if (line_no == 1) {
      absl::string_view name = line;
      if (!absl::ConsumePrefix(&name, "# method:"))
        return error(absl::StrCat("expected '# method: NAME' first, got '", line.substr(0, 80), "'"));
      out.method = std::string(absl::StripAsciiWhitespace(name));
      if (out.method.empty()) return error("the method's name is empty");
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
    if (fields.size() != 2 || fields[0].empty())
      return error(absl::StrCat("expected PROBLEM<TAB>CONFIGURATION, got ", fields.size(), " field(s)"));
    absl::StatusOr<TritonTile> tile = ParseTritonTile(fields[1]);
    if (!tile.ok()) return error(std::string(tile.status().message()));
    const std::string problem(fields[0]);
    if (!seen[problem].insert(*tile).second)
      return error(absl::StrCat(tile->Name(), " is listed twice for ", problem));
    out.orders[problem].push_back(*tile);
  }
  if (out.method.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty; expected '# method: NAME' first"));
  return out;
}

absl::StatusOr<ExternalTileOrders> ReadTileOrders(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseTileOrders(*text, path);
}

std::vector<double> ExternalOrderScores(const std::vector<TritonTile>& listed, const std::vector<TritonTile>& tiles) {
  std::map<TritonTile, size_t> position;
  for (size_t i = 0; i < listed.size(); ++i) position.emplace(listed[i], i);
  std::vector<double> scores(tiles.size());
  for (size_t i = 0; i < tiles.size(); ++i) {
    const auto it = position.find(tiles[i]);
    scores[i] = it != position.end() ? static_cast<double>(it->second) : static_cast<double>(listed.size() + i);
  }
  return scores;
}

absl::StatusOr<MethodReport> ExternalOrderReport(const ExternalTileOrders& orders,
                                                 const std::vector<KnownTileProblem>& problems,
                                                 const std::string& collection, const std::string& split,
                                                 absl::string_view what) {
  MethodReport m{orders.method, EvalReport{}};
  m.report.collection = collection;
  m.report.split = split;
  m.report.tile = true;
  for (const KnownTileProblem& p : problems) {
    const auto it = orders.orders.find(p.name);
    if (it == orders.orders.end())
      return absl::FailedPreconditionError(absl::StrCat(what, ": no order of problem ", p.name, " (", p.problem.Name(),
                                                        ") of ", collection, " ", split, " for ", orders.method));
    m.report.graphs.push_back(
        EvaluateScores(p.name, 0, 0, ExternalOrderScores(it->second, p.tiles), p.runtime, /*tile=*/true));
  }
  m.report.ComputeMean();
  return m;
}

}  // namespace tgraph
