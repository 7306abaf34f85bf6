#include "model/train/run_dir.h"

#include <torch/torch.h>

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "model/core/file_util.h"
#include "model/nn/model_io.h"

namespace tgraph {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr char kRunFormat[] = "tgraph.run.v1";

std::string RunInfoJson(const RunInfo& r) {
  json j;
  j["format"] = kRunFormat;
  j["collection"] = r.collection;
  j["data_fingerprint"] = r.fingerprint;
  j["num_folds"] = r.num_folds;
  j["spec"] = json::parse(r.spec.ToJson());
  j["feature_stats"] = json::parse(r.stats.ToJson());
  j["fold_of"] = r.fold_of;
  j["flags"] = r.flags;
  j["valid_batch"] = r.valid_batch;
  j["reference_configs"] = r.reference_configs;
  j["reference_groups"] = r.reference_groups;
  j["provenance"] = {{"data", r.provenance.data},
                     {"dataset", r.provenance.dataset},
                     {"graphs", r.provenance.graphs},
                     {"configurations", r.provenance.configurations}};
  if (r.tile_space) j["tile_space"] = json::parse(r.tile_space->ToJson());
  if (r.tile_prior) j["tile_prior"] = json::parse(r.tile_prior->ToJson());
  return j.dump(1);
}

}  // namespace

std::string FoldDir(const std::string& run_dir, int fold) { return absl::StrCat(run_dir, "/fold_", fold); }

absl::StatusOr<RunInfo> ReadRunInfo(const std::string& run_dir) {
  const std::string path = run_dir + "/run.json";
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || j.value("format", "") != kRunFormat)
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a tgraph run description"));
  RunInfo r;
  r.collection = j.value("collection", "");
  r.fingerprint = j.value("data_fingerprint", "");
  r.num_folds = j.value("num_folds", 0);
  r.valid_batch = j.value("valid_batch", int64_t{128});
  r.reference_configs = j.value("reference_configs", int64_t{256});
  r.reference_groups = j.value("reference_groups", int64_t{1});
  if (j.contains("provenance") && j["provenance"].is_object()) {  // runs prepared before provenance: unknown
    const json& p = j["provenance"];
    r.provenance.data = p.value("data", "");
    r.provenance.dataset = p.value("dataset", "");
    r.provenance.graphs = p.value("graphs", int64_t{0});
    r.provenance.configurations = p.value("configurations", int64_t{0});
  }
  if (j.contains("tile_space")) {
    absl::StatusOr<TileSpace> space = TileSpace::FromJson(j["tile_space"].dump(), path + ": tile_space");
    if (!space.ok()) return space.status();
    r.tile_space = std::move(*space);
  }
  if (j.contains("tile_prior")) {
    absl::StatusOr<TilePrior> prior = TilePrior::FromJson(j["tile_prior"].dump(), path + ": tile_prior");
    if (!prior.ok()) return prior.status();
    r.tile_prior = std::move(*prior);
  }
  absl::StatusOr<ModelSpec> spec = ModelSpec::FromJson(j["spec"].dump(), path + ": spec");
  if (!spec.ok()) return spec.status();
  r.spec = *spec;
  absl::StatusOr<FeatureStats> stats = FeatureStats::FromJson(j["feature_stats"].dump(), path + ": feature_stats");
  if (!stats.ok()) return stats.status();
  r.stats = *stats;
  for (auto& [k, v] : j["fold_of"].items()) r.fold_of[k] = v.get<int>();
  for (auto& [k, v] : j["flags"].items()) r.flags[k] = v.get<std::string>();
  return r;
}

absl::Status WriteRunInfo(const std::string& run_dir, const RunInfo& info) {
  return WriteFileAtomic(run_dir + "/run.json", RunInfoJson(info));
}

absl::StatusOr<FoldState> LoadCheckpoint(const std::string& dir, RankingNet& net, torch::optim::AdamW& opt) {
  FoldState st;
  const std::string state_path = dir + "/state.json";
  if (!fs::exists(state_path)) return st;
  absl::StatusOr<std::string> text = ReadFile(state_path);
  if (!text.ok()) return text.status();
  json s = json::parse(*text, nullptr, false);
  if (s.is_discarded()) return absl::DataLossError(absl::StrCat(state_path, ": not valid JSON"));
  st.step = s.value("step", int64_t{0});
  st.best = s.value("best", st.best);
  st.best_step = s.value("best_step", int64_t{-1});
  st.seconds_before = s.value("seconds", 0.0);
  st.graphs_per_step = s.value("graphs_per_step", int64_t{1});
  if (absl::Status w = LoadWeights(net, dir + "/" + s.value("weights", "")); !w.ok()) return w;
  try {
    torch::serialize::InputArchive in;
    in.load_from(dir + "/" + s.value("optimizer", ""));
    opt.load(in);
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat(dir, ": optimizer checkpoint unreadable: ", e.what_without_backtrace()));
  }
  return st;
}

absl::Status SaveCheckpoint(const std::string& dir, RankingNet& net, torch::optim::AdamW& opt, const FoldState& st,
                            double seconds) {
  const std::string weights = absl::StrCat("ckpt_", st.step, ".npz"), optim = absl::StrCat("ckpt_", st.step, ".opt");
  if (absl::Status s = SaveWeights(net, dir + "/" + weights); !s.ok()) return s;
  try {
    torch::serialize::OutputArchive out;
    opt.save(out);
    out.save_to(dir + "/" + optim);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(dir, ": cannot save optimizer state: ", e.what_without_backtrace()));
  }
  const json state = {{"step", st.step},   {"best", st.best},      {"best_step", st.best_step},
                      {"weights", weights}, {"optimizer", optim}, {"seconds", seconds},
                      {"graphs_per_step", st.graphs_per_step}};
  if (absl::Status s = WriteFileAtomic(dir + "/state.json", state.dump()); !s.ok()) return s;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ckpt_", 0) == 0 && name != weights && name != optim) fs::remove(e.path(), ec);
  }
  return absl::OkStatus();
}

absl::Status WriteFoldResult(const std::string& dir, const FoldResult& r, int64_t total_steps) {
  json summary = {{"fold", r.fold},
                  {"valid_score", std::isfinite(r.valid_score) ? json(r.valid_score) : json()},
                  {"best_step", r.best_step},
                  {"steps", total_steps},
                  {"seconds", r.seconds},
                  {"peak_rss_bytes", r.peak_rss_bytes},
                  {"weights", "best.npz"}};
  if (!r.share_scores.empty()) summary["network_shares"] = NetworkSharesJson(r.share_scores);
  return WriteFileAtomic(dir + "/result.json", summary.dump(1));
}

json NetworkSharesJson(const std::map<double, double>& share_scores) {
  json shares = json::array();
  for (const auto& [share, score] : share_scores)
    shares.push_back({{"network_share", share}, {"valid_score", std::isfinite(score) ? json(score) : json()}});
  return shares;
}

std::map<double, double> NetworkSharesFromJson(const json& j) {
  std::map<double, double> out;
  if (!j.is_array()) return out;
  for (const json& s : j)
    if (s.is_object() && s.contains("network_share") && s["network_share"].is_number())
      out[s["network_share"].get<double>()] =
          s.contains("valid_score") && s["valid_score"].is_number() ? s["valid_score"].get<double>() : std::nan("");
  return out;
}

absl::StatusOr<std::map<double, double>> MeanShareScores(const std::string& log_path, int64_t after) {
  absl::StatusOr<std::string> text = ReadFile(log_path);
  if (!text.ok()) return text.status();
  std::map<int64_t, std::map<double, double>> by_step;
  int64_t line_no = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    ++line_no;
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      return absl::DataLossError(absl::StrCat(log_path, ": line ", line_no, ": not a JSON object"));
    if (!j.contains("step") || !j["step"].is_number_integer() || !j.contains("network_shares")) continue;
    const int64_t step = j["step"].get<int64_t>();
    if (step > after) by_step[step] = NetworkSharesFromJson(j["network_shares"]);
  }
  std::map<double, double> sum, count;
  for (const auto& [step, shares] : by_step)
    for (const auto& [share, score] : shares)
      if (std::isfinite(score)) {
        sum[share] += score;
        count[share] += 1;
      }
  for (auto& [share, s] : sum) s /= count[share];
  return sum;
}

absl::StatusOr<std::vector<FoldResult>> ReadFoldResults(const std::string& run_dir) {
  std::vector<FoldResult> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string path = e.path().string() + "/result.json";
    if (e.path().filename().string().rfind("fold_", 0) != 0 || !fs::exists(path)) continue;
    absl::StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) return text.status();
    json j = json::parse(*text, nullptr, false);
    if (j.is_discarded()) return absl::DataLossError(absl::StrCat(path, ": not valid JSON"));
    FoldResult r;
    r.fold = j.value("fold", -1);
    r.valid_score = j["valid_score"].is_number() ? j["valid_score"].get<double>() : -1e300;
    r.best_step = j.value("best_step", int64_t{-1});
    r.seconds = j.value("seconds", 0.0);
    r.peak_rss_bytes = j.value("peak_rss_bytes", int64_t{0});
    if (j.contains("network_shares")) r.share_scores = NetworkSharesFromJson(j["network_shares"]);
    out.push_back(r);
  }
  if (ec) return absl::NotFoundError(absl::StrCat(run_dir, ": cannot list: ", ec.message()));
  std::sort(out.begin(), out.end(), [](const FoldResult& a, const FoldResult& b) {
    return a.valid_score != b.valid_score ? a.valid_score > b.valid_score : a.fold < b.fold;
  });
  return out;
}

absl::StatusOr<FoldLog> FoldLog::Open(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return ErrnoStatus(errno, absl::StrCat(path, ": open"));
  return FoldLog(f);
}

FoldLog::FoldLog(FoldLog&& other) noexcept : file_(std::exchange(other.file_, nullptr)) {}

FoldLog::~FoldLog() {
  if (file_) std::fclose(file_);
}

void FoldLog::Write(const json& line) {
  std::fprintf(file_, "%s\n", line.dump().c_str());
  std::fflush(file_);
}

}  // namespace tgraph
