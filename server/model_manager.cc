#include "server/model_manager.h"

#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/strings/str_join.h"
#include "model/nn/model_io.h"

namespace tgraph {

ModelManager::ModelManager(Registry registry, Options options)
    : registry_(std::move(registry)), options_(options) {}

ModelManager::~ModelManager() { Stop(); }

const char* ModelEvent::KindName() const {
  switch (kind) {
    case Kind::kLoaded: return "loaded";
    case Kind::kFailed: return "failed";
    case Kind::kUnloaded: return "unloaded";
    case Kind::kVanished: return "vanished";
    case Kind::kCorrupted: return "corrupted";
  }
  return "unknown";
}

std::vector<ModelEvent> ModelManager::Poll() {
  absl::MutexLock poll_lock(&poll_mu_);
  std::vector<ModelEvent> events;
  std::set<std::string> collections;
  for (const std::string& c : registry_.ListCollections()) collections.insert(c);
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [c, loaded] : models_) collections.insert(c);  // also those whose versions all went
  }
  for (const std::string& collection : collections) {
    const std::vector<int64_t> listed = registry_.ListVersions(collection);
    LoadNewest(collection, listed, &events);
    UnloadRetired(collection, listed, &events);
  }
  CheckLoadedFiles(&events);
  return events;
}

void ModelManager::LoadNewest(const std::string& collection, const std::vector<int64_t>& listed,
                              std::vector<ModelEvent>* events) {
  // The newest keep_versions versions that load, newest first (it serves as soon as it
  // is in). A version that failed and has not changed since is passed over, so that
  // corrupt newest versions leave the server on the newest good ones rather than on
  // nothing (or on fewer than keep_versions).
  for (auto it = listed.rbegin(); it != listed.rend(); ++it) {
    const int64_t v = *it;
    const std::string stamp = registry_.VersionStamp(collection, v);
    {
      absl::MutexLock lock(&mu_);
      const auto& have = models_[collection];
      // Loaded versions at least as new as v (vanished newer ones, still serving, too).
      const auto at_least_v = static_cast<int>(std::distance(have.lower_bound(v), have.end()));
      if (at_least_v >= options_.keep_versions) break;
      if (have.count(v)) continue;
      auto failed = failed_.find({collection, v});
      if (failed != failed_.end() && failed->second == stamp) continue;  // unchanged since it failed
    }
    // Loading (reading, verifying, building networks) happens outside the lock.
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<LoadedModel> m = LoadModel(registry_, collection, v);
    ModelEvent e{collection, v, m.ok() ? ModelEvent::Kind::kLoaded : ModelEvent::Kind::kFailed,
                 m.ok() ? m->manifest.provenance.Summary() : std::string(m.status().message()),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                 m.ok() && m->manifest.provenance.SyntheticOnly()};
    absl::MutexLock lock(&mu_);
    if (m.ok()) {
      for (const auto& net : m->folds) {
        net->SetInferenceFolding(options_.fold_inference);
        net->SetInferencePrecision(options_.precision);
      }
      models_[collection][v] = std::make_shared<const LoadedModel>(std::move(*m));
      failed_.erase({collection, v});
      verified_stamp_[{collection, v}] = stamp;
    } else {
      failed_[{collection, v}] = stamp;
      ++failed_loads_;
    }
    events->push_back(std::move(e));
  }
}

void ModelManager::UnloadRetired(const std::string& collection, const std::vector<int64_t>& listed,
                                 std::vector<ModelEvent>* events) {
  absl::MutexLock lock(&mu_);
  auto& loaded = models_[collection];
  // Versions retired in the registry are unloaded: a rollback. The last loaded version
  // of a collection stays, so that a collection never goes dark. A version that is
  // gone without a RETIRED marker (its folder deleted, the registry re-created or
  // mounted wrong) is not a rollback: it keeps serving, reported once, rather than the
  // server silently dropping from version 19 to 1.
  const std::set<int64_t> live(listed.begin(), listed.end());
  for (auto it = loaded.begin(); it != loaded.end() && loaded.size() > 1;) {
    if (live.count(it->first)) {
      vanished_.erase({collection, it->first});
      ++it;
      continue;
    }
    if (!registry_.IsRetired(collection, it->first)) {
      if (vanished_.insert({collection, it->first}).second)
        events->push_back({collection, it->first, ModelEvent::Kind::kVanished,
                           absl::StrCat("gone from the registry without being retired (", registry_.root(),
                                        " lost or re-created?): still serving it; retire versions to roll back"),
                           0});
      ++it;
      continue;
    }
    events->push_back({collection, it->first, ModelEvent::Kind::kUnloaded, "retired in the registry", 0});
    it = loaded.erase(it);  // in-flight requests keep their shared_ptr
  }
  while (static_cast<int>(loaded.size()) > options_.keep_versions) loaded.erase(loaded.begin());
}

void ModelManager::CheckLoadedFiles(std::vector<ModelEvent>* events) {
  std::vector<std::pair<std::string, int64_t>> loaded;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [collection, versions] : models_)
      for (const auto& [v, model] : versions) loaded.emplace_back(collection, v);
  }
  std::map<std::string, std::set<int64_t>> listed;
  for (const auto& key : loaded) {
    const auto& [collection, v] = key;
    if (!listed.count(collection)) {
      const std::vector<int64_t> versions = registry_.ListVersions(collection);
      listed[collection] = std::set<int64_t>(versions.begin(), versions.end());
    }
    if (!listed[collection].count(v)) continue;  // retired or vanished: Poll says so
    const std::string stamp = registry_.VersionStamp(collection, v);
    {
      absl::MutexLock lock(&mu_);
      if (verified_stamp_[key] == stamp || corrupt_stamp_[key] == stamp) continue;
    }
    const absl::StatusOr<Manifest> on_disk = registry_.ReadVersion(collection, v);  // checksums, off the lock
    absl::MutexLock lock(&mu_);
    auto model = models_[collection].find(v);
    if (model == models_[collection].end()) continue;  // unloaded meanwhile
    std::string problem;
    if (!on_disk.ok()) {
      problem = absl::StrCat("its files changed on disk since it loaded and no longer verify (",
                             on_disk.status().message(), ")");
    } else {
      const std::vector<FoldEntry>& mine = model->second->manifest.folds;
      bool same = mine.size() == on_disk->folds.size();
      for (size_t f = 0; same && f < mine.size(); ++f) same = mine[f].sha256 == on_disk->folds[f].sha256;
      if (!same) problem = "its files were replaced on disk by other weights since it loaded";
    }
    if (problem.empty()) {  // touched, or fixed: the content it serves
      verified_stamp_[key] = stamp;
      corrupt_stamp_.erase(key);
      continue;
    }
    corrupt_stamp_[key] = stamp;
    events->push_back({collection, v, ModelEvent::Kind::kCorrupted,
                       absl::StrCat(problem,
                                    ": still serving the copy loaded then, which is intact; a replica that starts now "
                                    "will not serve the same model: re-publish it, or retire it to roll back"),
                       0});
  }
}

void ModelManager::StartPolling(double interval_seconds,
                                std::function<void(const std::vector<ModelEvent>&)> on_events) {
  Stop();
  {
    absl::MutexLock lock(&stop_mu_);
    stopping_ = false;
  }
  poller_ = std::thread([this, interval_seconds, on_events = std::move(on_events)] {
    while (true) {
      {
        absl::MutexLock lock(&stop_mu_);
        if (stop_mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Seconds(interval_seconds))) return;
      }
      std::vector<ModelEvent> events = Poll();
      if (on_events) on_events(events);
    }
  });
}

void ModelManager::Stop() {
  {
    absl::MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  if (poller_.joinable()) poller_.join();
}

absl::StatusOr<ModelHandle> ModelManager::Get(const std::string& collection, int64_t version) const {
  absl::MutexLock lock(&mu_);
  auto it = models_.find(collection);
  if (it == models_.end() || it->second.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, versions] : models_)
      if (!versions.empty()) names.push_back(name);
    return absl::NotFoundError(absl::StrCat("no model is loaded for collection '", collection, "' (loaded: ",
                                            names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
  }
  if (version == kLatestVersion) {
    const auto& newest = *it->second.rbegin();
    return ModelHandle{collection, newest.first, newest.second};
  }
  auto v = it->second.find(version);
  if (v == it->second.end()) {
    std::vector<int64_t> loaded;
    for (const auto& [num, model] : it->second) loaded.push_back(num);
    return absl::NotFoundError(absl::StrCat("version ", version, " of '", collection,
                                            "' is not loaded (loaded versions: ", absl::StrJoin(loaded, ", "), ")"));
  }
  return ModelHandle{collection, v->first, v->second};
}

std::map<std::string, std::vector<ModelHandle>> ModelManager::Loaded() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, std::vector<ModelHandle>> out;
  for (const auto& [collection, versions] : models_)
    for (auto it = versions.rbegin(); it != versions.rend(); ++it)
      out[collection].push_back({collection, it->first, it->second});
  return out;
}

bool ModelManager::AnyLoaded() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [collection, versions] : models_)
    if (!versions.empty()) return true;
  return false;
}

}  // namespace tgraph
