#include "model/core/tile_prior.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace tgraph {

using json = nlohmann::json;

double TilePrior::Of(absl::string_view dtype, const TritonTile& tile) const {
  auto table = values.find(std::string(dtype));
  if (table == values.end()) table = values.find(TileBaselines::kAnyDtype);
  if (table == values.end() || table->second.empty()) return 0.0;
  const auto it = table->second.find(tile);
  if (it != table->second.end()) return it->second;
  double worst = table->second.begin()->second;
  for (const auto& [t, v] : table->second) worst = std::max(worst, v);
  return worst;
}

TilePrior BuildTilePrior(const TileBaselines& known, double weight) {
  TilePrior p;
  p.weight = weight;
  p.problems = static_cast<int64_t>(known.size());
  for (const auto& [dtype, tiles] : known.mean_log_slowdown()) {
    double mean = 0, sq = 0;
    for (const auto& [t, v] : tiles) mean += v;
    mean /= static_cast<double>(tiles.size());
    for (const auto& [t, v] : tiles) sq += (v - mean) * (v - mean);
    const double sd = std::sqrt(sq / static_cast<double>(tiles.size()));
    std::map<TritonTile, double>& out = p.values[dtype];
    for (const auto& [t, v] : tiles) out[t] = sd > 0 ? (v - mean) / sd : 0.0;
  }
  return p;
}

std::string TilePrior::ToJson() const {
  json j;
  j["weight"] = weight;
  j["problems"] = problems;
  json v = json::object();
  for (const auto& [dtype, tiles] : values) {
    json t = json::object();
    for (const auto& [tile, value] : tiles) t[tile.Name()] = value;
    v[dtype] = std::move(t);
  }
  j["values"] = std::move(v);
  return j.dump();
}

absl::StatusOr<TilePrior> TilePrior::FromJson(const std::string& text, absl::string_view what) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](absl::string_view key, absl::string_view expected) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "': expected ", expected));
  };
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(what, ": expected a JSON object"));
  TilePrior p;
  if (!j.contains("weight") || !j["weight"].is_number() || !std::isfinite(j["weight"].get<double>()) ||
      j["weight"].get<double>() < 0)
    return bad("weight", "a finite number >= 0");
  p.weight = j["weight"].get<double>();
  if (!j.contains("problems") || !j["problems"].is_number_integer() || j["problems"].get<int64_t>() < 0)
    return bad("problems", "an integer >= 0");
  p.problems = j["problems"].get<int64_t>();
  if (!j.contains("values") || !j["values"].is_object()) return bad("values", "an object of dtypes");
  for (const auto& [dtype, tiles] : j["values"].items()) {
    if (!tiles.is_object()) return bad(absl::StrCat("values.", dtype), "an object of configurations");
    for (const auto& [name, value] : tiles.items()) {
      absl::StatusOr<TritonTile> tile = ParseTritonTile(name);
      if (!tile.ok()) return bad(absl::StrCat("values.", dtype, ".", name), tile.status().message());
      if (!value.is_number() || !std::isfinite(value.get<double>()))
        return bad(absl::StrCat("values.", dtype, ".", name), "a finite number");
      p.values[dtype][*tile] = value.get<double>();
    }
  }
  return p;
}

}  // namespace tgraph
