#include "model/nn/model_io.h"

#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/core/npy.h"

namespace tgraph {

absl::Status SaveWeights(RankingNet& net, const std::string& path) {
  NpzArchive arrays;
  for (const auto& item : net.named_parameters()) {
    torch::Tensor t = item.value().detach().to(torch::kFloat32).contiguous();
    NpyArray a;
    a.dtype = DType::kFloat32;
    a.shape.assign(t.sizes().begin(), t.sizes().end());
    a.bytes.resize(t.numel() * sizeof(float));
    std::memcpy(a.bytes.data(), t.data_ptr<float>(), a.bytes.size());
    arrays[item.key()] = std::move(a);
  }
  return WriteNpz(path, arrays);
}

absl::Status LoadWeights(RankingNet& net, const std::string& path) {
  absl::StatusOr<NpzArchive> npz = ReadNpz(path);
  if (!npz.ok()) return npz.status();
  std::set<std::string> expected;
  torch::NoGradGuard no_grad;
  for (auto& item : net.named_parameters()) {
    expected.insert(item.key());
    auto it = npz->find(item.key());
    if (it == npz->end())
      return absl::DataLossError(absl::StrCat(path, ": parameter '", item.key(), "' is missing"));
    const NpyArray& a = it->second;
    const std::vector<int64_t> want(item.value().sizes().begin(), item.value().sizes().end());
    if (a.dtype != DType::kFloat32 || a.shape != want)
      return absl::DataLossError(absl::StrCat(path, ": parameter '", item.key(), "' has ", DTypeName(a.dtype), " ",
                                              a.ShapeString(), ", the architecture needs float32 (",
                                              absl::StrJoin(want, ", "), ")"));
    std::memcpy(item.value().data_ptr<float>(), a.bytes.data(), a.bytes.size());
    // NaN or infinite weights (a diverged run, with a valid checksum) would answer every
    // request with NaN scores: refused here, so such a version never serves.
    const float* w = item.value().data_ptr<float>();
    int64_t bad = 0;
    for (int64_t i = 0; i < item.value().numel(); ++i) bad += !std::isfinite(w[i]);
    if (bad > 0)
      return absl::DataLossError(absl::StrCat(path, ": parameter '", item.key(), "' has ", bad,
                                              " non-finite values (NaN or infinity): the weights are unusable"));
  }
  for (const auto& [key, value] : *npz)
    if (!expected.count(key))
      return absl::DataLossError(absl::StrCat(path, ": unexpected parameter '", key, "' for this architecture"));
  return absl::OkStatus();
}

absl::StatusOr<LoadedModel> LoadFolds(const Manifest& manifest, const std::string& dir) {
  LoadedModel model;
  model.manifest = manifest;
  for (const FoldEntry& f : manifest.folds) {
    std::shared_ptr<RankingNet> net = MakeRankingNet(manifest.spec);
    const std::string path = !f.weights.empty() && f.weights[0] == '/' ? f.weights : absl::StrCat(dir, "/", f.weights);
    if (absl::Status s = LoadWeights(*net, path); !s.ok()) return s;
    net->eval();
    model.folds.push_back(std::move(net));
  }
  return model;
}

absl::StatusOr<int64_t> PublishLoadable(const Registry& registry, const Manifest& manifest, bool* already_published) {
  if (absl::StatusOr<LoadedModel> loaded = LoadFolds(manifest, "."); !loaded.ok())
    return absl::Status(loaded.status().code(), absl::StrCat("not published: ", loaded.status().message()));
  return registry.Publish(manifest, already_published);
}

absl::StatusOr<LoadedModel> LoadModel(const Registry& registry, const std::string& collection, int64_t version) {
  absl::StatusOr<Manifest> m = registry.ReadVersion(collection, version);
  if (!m.ok()) return m.status();
  return LoadFolds(*m, registry.VersionDir(collection, version));
}

absl::StatusOr<LoadedModel> LoadModelOrLatest(const Registry& registry, const std::string& collection,
                                              int64_t version, int64_t* loaded) {
  if (version == kLatestVersion) {
    absl::StatusOr<int64_t> latest = registry.LatestVersion(collection);
    if (!latest.ok()) return latest.status();
    version = *latest;
  }
  if (loaded) *loaded = version;
  return LoadModel(registry, collection, version);
}

}  // namespace tgraph
