#include "model/tile/tile_prior.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace tgraph {

using json = nlohmann::json;

namespace {

// Mean 0, standard deviation 1 over the table (a constant table: all 0).
void Standardise(std::map<TritonTile, double>* table) {
  if (table->empty()) return;
  double mean = 0, sq = 0;
  for (const auto& [t, v] : *table) mean += v;
  mean /= static_cast<double>(table->size());
  for (const auto& [t, v] : *table) sq += (v - mean) * (v - mean);
  const double sd = std::sqrt(sq / static_cast<double>(table->size()));
  for (auto& [t, v] : *table) v = sd > 0 ? (v - mean) / sd : 0.0;
}

double Round4(double v) { return std::round(v * 1e4) / 1e4; }

// A problem's table as one string, "0 0.6931 - 1.3863" ('-': not measured): a manifest is
// written indented, where an array would take a line per value. Values hold 1e-4 steps,
// so "%.4f" and parsing it back give the same double.
std::string EncodeValues(const std::vector<double>& values) {
  std::string out;
  for (double v : values) {
    if (!out.empty()) out += ' ';
    if (std::isnan(v)) {
      out += '-';
      continue;
    }
    std::string x = absl::StrFormat("%.4f", v);
    while (x.back() == '0') x.pop_back();
    if (x.back() == '.') x.pop_back();
    out += x;
  }
  return out;
}

}  // namespace

double TilePriorValues::Of(const TritonTile& tile) const {
  if (values.empty()) return 0.0;
  const auto it = values.find(tile);
  if (it != values.end()) return it->second;
  double worst = values.begin()->second;
  for (const auto& [t, v] : values) worst = std::max(worst, v);
  return worst;
}

TilePriorValues TilePrior::For(const GemmProblem& problem, bool leave_shape_out) const {
  return For(problem, {}, leave_shape_out);
}

TilePriorValues TilePrior::For(const GemmProblem& problem, const std::vector<MeasuredTile>& own,
                               bool leave_shape_out) const {
  TilePriorValues out;
  out.weight = weight;
  out.network_share = network_share;
  if (!measured.problems().empty()) {
    const MeasuredSlowdowns* table = &measured;
    MeasuredSlowdowns shifted;
    if (!own.empty()) {
      const std::vector<double> expected = measured.Near(problem, bandwidth, leave_shape_out);
      // One measurement says nothing of the others (TileCorrection): counted from two.
      if (const size_t used = TileCorrectionMeasurements(measured.tiles(), expected, own); used >= 2) {
        out.measurements = static_cast<int64_t>(used);
        shifted = measured.Shifted(TileCorrection(measured.tiles(), expected, own));
        table = &shifted;
      }
    }
    const std::vector<double> near =
        near_end.on() ? table->NearEnd(problem, bandwidth, near_end.excess, near_end.guard, leave_shape_out)
                      : table->Near(problem, bandwidth, leave_shape_out);
    for (size_t t = 0; t < near.size(); ++t)
      if (!std::isnan(near[t])) out.values[measured.tiles()[t]] = near[t];
    Standardise(&out.values);
    return out;
  }
  auto table = values.find(problem.dtype);
  if (table == values.end()) table = values.find(kAnyDtype);
  if (table != values.end()) out.values = table->second;
  return out;
}

absl::StatusOr<TilePrior> BuildTilePrior(const std::vector<KnownTileProblem>& known, double weight,
                                         const ShapeBandwidth& bandwidth) {
  const MeasuredSlowdowns all(known);
  if (static_cast<int64_t>(all.problems().size()) > kMaxTilePriorProblems)
    return absl::InvalidArgumentError(absl::StrCat("a tile prior keeps at most ", kMaxTilePriorProblems,
                                                   " measured problems (a manifest's size); this run has ",
                                                   all.problems().size(), ": train without it (--tile_prior_weight 0)"));
  std::vector<MeasuredSlowdowns::Problem> rounded = all.problems();
  for (MeasuredSlowdowns::Problem& p : rounded)
    for (double& v : p.log_slowdown)
      if (!std::isnan(v)) v = Round4(v);
  TilePrior p;
  p.weight = weight;
  p.bandwidth = bandwidth;
  p.problems = static_cast<int64_t>(rounded.size());
  p.measured = MeasuredSlowdowns(all.tiles(), std::move(rounded));
  return p;
}

double ChooseNetworkShare(const std::vector<std::map<double, double>>& per_fold) {
  if (per_fold.empty()) return 1.0;
  double best_share = 1.0, best = -std::numeric_limits<double>::infinity();
  for (auto share = std::rbegin(kNetworkShares); share != std::rend(kNetworkShares); ++share) {
    double sum = 0;
    for (const std::map<double, double>& fold : per_fold) {
      const auto it = fold.find(*share);
      if (it == fold.end() || !std::isfinite(it->second)) return 1.0;
      sum += it->second;
    }
    if (sum > best) {
      best = sum;
      best_share = *share;
    }
  }
  return best_share;
}

std::string TilePrior::Summary() const {
  return absl::StrCat(absl::StrFormat("%g", network_share), " x the network's standardised scores + ",
                      absl::StrFormat("%g", weight), " x the prior of ", problems, " measured problems",
                      network_share == 0 && weight > 0
                          ? " (the prior alone ranks: the network did not add to it on the training run's "
                            "validation problems)"
                          : "");
}

std::string TilePrior::ToJson() const {
  json j;
  j["weight"] = weight;
  j["bandwidth"] = {{"output", bandwidth.output}, {"k", bandwidth.k}, {"aspect", bandwidth.aspect}};
  j["problems"] = problems;
  if (residual) j["residual"] = true;
  if (near_end.on()) j["near_end"] = {{"excess", near_end.excess}, {"guard", near_end.guard}};
  if (network_share != 1.0) j["network_share"] = network_share;
  if (!measured.problems().empty()) {
    json tiles = json::array();
    for (const TritonTile& t : measured.tiles()) tiles.push_back(t.Name());
    j["tiles"] = std::move(tiles);
    json rows = json::array();
    for (const MeasuredSlowdowns::Problem& p : measured.problems()) {
      json row = {{"dtype", p.problem.dtype}, {"m", p.problem.m}, {"n", p.problem.n}, {"k", p.problem.k},
                  {"log_slowdown", EncodeValues(p.log_slowdown)}};
      if (!p.kernel.empty()) {
        row["kernel"] = p.kernel;
        row["stored"] = p.stored;
      }
      rows.push_back(std::move(row));
    }
    j["measured"] = std::move(rows);
    return j.dump();
  }
  json v = json::object();
  for (const auto& [dtype, tiles] : values) {
    json t = json::object();
    for (const auto& [tile, value] : tiles) t[tile.Name()] = value;
    v[dtype] = std::move(t);
  }
  j["values"] = std::move(v);
  return j.dump();
}

namespace {

// What the JSON readers refuse: `key` of `what`, and what was expected.
absl::Status BadKey(absl::string_view what, absl::string_view key, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "': expected ", expected));
}

// measured[i] (`at`): a problem and its log slowdown on each of `tiles` configurations.
absl::StatusOr<MeasuredSlowdowns::Problem> ReadMeasuredProblem(const json& q, const std::string& at, size_t tiles,
                                                               absl::string_view what) {
  const auto bad = [&](absl::string_view key, absl::string_view expected) { return BadKey(what, key, expected); };
  if (!q.is_object()) return bad(at, "an object");
  MeasuredSlowdowns::Problem m;
  if (!q.contains("dtype") || !q["dtype"].is_string() || q["dtype"].get<std::string>().empty())
    return bad(at + ".dtype", "a dtype name");
  m.problem.dtype = q["dtype"].get<std::string>();
  const std::pair<const char*, int64_t*> dims[] = {{"m", &m.problem.m}, {"n", &m.problem.n}, {"k", &m.problem.k}};
  for (const auto& [key, dim] : dims) {
    if (!q.contains(key) || !q[key].is_number_integer() || q[key].get<int64_t>() < 1)
      return bad(absl::StrCat(at, ".", key), "an integer >= 1");
    *dim = q[key].get<int64_t>();
  }
  // A farm's measured problem (tgraph-train finetune): its kernel's key and graph's hash.
  if (q.contains("kernel") || q.contains("stored")) {
    for (const char* key : {"kernel", "stored"})
      if (!q.contains(key) || !q[key].is_string() || q[key].get_ref<const std::string&>().empty() ||
          q[key].get_ref<const std::string&>().size() > 256)
        return bad(absl::StrCat(at, ".", key), "a string of 1-256 characters, with both 'kernel' and 'stored'");
    m.kernel = q["kernel"].get<std::string>();
    m.stored = q["stored"].get<std::string>();
  }
  if (!q.contains("log_slowdown") || !q["log_slowdown"].is_string())
    return bad(at + ".log_slowdown", "a string of values, one per tile");
  const std::vector<absl::string_view> values =
      absl::StrSplit(q["log_slowdown"].get_ref<const std::string&>(), ' ', absl::SkipEmpty());
  if (values.size() != tiles)
    return bad(at + ".log_slowdown", absl::StrCat(tiles, " values (one per tile), not ", values.size()));
  for (size_t t = 0; t < values.size(); ++t) {
    double v = 0;
    if (values[t] == "-") {
      m.log_slowdown.push_back(std::nan(""));
    } else if (absl::SimpleAtod(values[t], &v) && std::isfinite(v) && v >= 0) {
      m.log_slowdown.push_back(v);
    } else {
      return bad(absl::StrCat(at, ".log_slowdown, value ", t + 1),
                 absl::StrCat("a finite number >= 0 or '-', not '", values[t].substr(0, 32), "'"));
    }
  }
  return m;
}

// A prior's measured problems: the configurations ("tiles", sorted, each once) and each
// problem's log slowdowns on them ("measured").
absl::StatusOr<MeasuredSlowdowns> ReadMeasured(const json& j, absl::string_view what) {
  const auto bad = [&](absl::string_view key, absl::string_view expected) { return BadKey(what, key, expected); };
  if (!j.contains("tiles") || !j["tiles"].is_array()) return bad("tiles", "an array of configurations");
  std::vector<TritonTile> tiles;
  for (size_t i = 0; i < j["tiles"].size(); ++i) {
    const json& name = j["tiles"][i];
    const std::string key = absl::StrCat("tiles[", i, "]");
    if (!name.is_string()) return bad(key, "a configuration's name");
    absl::StatusOr<TritonTile> tile = ParseTritonTile(name.get<std::string>());
    if (!tile.ok()) return bad(key, tile.status().message());
    if (!tiles.empty() && !(tiles.back() < *tile)) return bad(key, "configurations in sorted order, each once");
    tiles.push_back(*tile);
  }
  if (!j["measured"].is_array()) return bad("measured", "an array of problems");
  std::vector<MeasuredSlowdowns::Problem> problems;
  for (size_t i = 0; i < j["measured"].size(); ++i) {
    absl::StatusOr<MeasuredSlowdowns::Problem> m =
        ReadMeasuredProblem(j["measured"][i], absl::StrCat("measured[", i, "]"), tiles.size(), what);
    if (!m.ok()) return m.status();
    problems.push_back(std::move(*m));
  }
  return MeasuredSlowdowns(std::move(tiles), std::move(problems));
}

}  // namespace

absl::StatusOr<TilePrior> TilePrior::FromJson(const std::string& text, absl::string_view what) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](absl::string_view key, absl::string_view expected) { return BadKey(what, key, expected); };
  const auto finite = [](const json& v) { return v.is_number() && std::isfinite(v.get<double>()); };
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(what, ": expected a JSON object"));
  TilePrior p;
  if (!j.contains("weight") || !finite(j["weight"]) || j["weight"].get<double>() < 0)
    return bad("weight", "a finite number >= 0");
  p.weight = j["weight"].get<double>();
  if (!j.contains("problems") || !j["problems"].is_number_integer() || j["problems"].get<int64_t>() < 0)
    return bad("problems", "an integer >= 0");
  p.problems = j["problems"].get<int64_t>();
  if (j.contains("bandwidth")) {
    // A number: one bandwidth along log2 (M, N, K), what manifests held before the axes
    // had their own.
    const json& b = j["bandwidth"];
    if (finite(b)) {
      p.bandwidth = ShapeBandwidth::Isotropic(b.get<double>());
    } else if (b.is_object() && b.size() == 3 && b.contains("output") && b.contains("k") && b.contains("aspect") &&
               finite(b["output"]) && finite(b["k"]) && finite(b["aspect"])) {
      p.bandwidth = {b["output"].get<double>(), b["k"].get<double>(), b["aspect"].get<double>()};
    } else {
      p.bandwidth.output = -1;  // refused below
    }
    if (!p.bandwidth.Valid())
      return bad("bandwidth", "{\"output\": B, \"k\": B, \"aspect\": B} or one number B, each in 0..16, all 0 or all > 0");
  }
  if (j.contains("residual")) {
    if (!j["residual"].is_boolean()) return bad("residual", "true or false");
    p.residual = j["residual"].get<bool>();
  }
  if (j.contains("near_end")) {
    const json& n = j["near_end"];
    if (!n.is_object() || n.size() != 2 || !n.contains("excess") || !n.contains("guard") || !finite(n["excess"]) ||
        !finite(n["guard"]) || !(n["excess"].get<double>() > 0) || n["guard"].get<double>() < 0)
      return bad("near_end", "{\"excess\": E, \"guard\": G} with E > 0 and G >= 0");
    p.near_end = {n["excess"].get<double>(), n["guard"].get<double>()};
  }
  if (j.contains("network_share")) {
    const json& s = j["network_share"];
    if (!finite(s) || s.get<double>() < 0 || s.get<double>() > 1) return bad("network_share", "a number in 0..1");
    p.network_share = s.get<double>();
  }
  if (j.contains("measured")) {
    absl::StatusOr<MeasuredSlowdowns> measured = ReadMeasured(j, what);
    if (!measured.ok()) return measured.status();
    p.measured = std::move(*measured);
    return p;
  }
  if (!j.contains("values") || !j["values"].is_object()) return bad("values", "an object of dtypes (or 'measured')");
  for (const auto& [dtype, tiles] : j["values"].items()) {
    if (!tiles.is_object()) return bad(absl::StrCat("values.", dtype), "an object of configurations");
    for (const auto& [name, value] : tiles.items()) {
      absl::StatusOr<TritonTile> tile = ParseTritonTile(name);
      if (!tile.ok()) return bad(absl::StrCat("values.", dtype, ".", name), tile.status().message());
      if (!finite(value)) return bad(absl::StrCat("values.", dtype, ".", name), "a finite number");
      p.values[dtype][*tile] = value.get<double>();
    }
  }
  return p;
}

}  // namespace tgraph
