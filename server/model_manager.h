// Loads published model versions from the registry, keeps the latest few of every
// collection in memory, and swaps new versions in atomically, off the request path.
// A request holds a shared_ptr to the version it started with, so a swap never
// disturbs it; a version that fails to load (corrupt, incomplete) is reported and the
// previous one keeps serving. Torch-free header.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "model/store/registry.h"

namespace tgraph {

struct LoadedModel;  // model/nn/model_io.h

struct ModelHandle {
  std::string collection;
  int64_t version = 0;
  std::shared_ptr<const LoadedModel> model;
};

// What one poll did, for logs and metrics.
struct ModelEvent {
  enum class Kind {
    kLoaded,    // a new version loaded and serving
    kFailed,    // a version failed to load (message says why); the previous one serves
    kUnloaded,  // retired in the registry, so unloaded (a rollback)
    kVanished,  // gone from the registry without being retired (a registry lost or
                // re-created?): kept serving, reported once
    kCorrupted, // a loaded version's files changed on disk and no longer verify: the
                // intact copy in memory keeps serving, reported once per change
  };
  std::string collection;
  int64_t version = 0;
  Kind kind = Kind::kLoaded;
  std::string message;  // why, when failed or unloaded; loaded: what it was trained on (Provenance::Summary)
  double seconds = 0;   // load time
  bool synthetic_only = false;  // loaded: trained only on synthetic data
  // The metric label and log word: "loaded", "failed", "unloaded", "vanished" or "corrupted".
  const char* KindName() const;
};

class ModelManager {
 public:
  struct Options {
    int keep_versions = 2;      // newest versions kept loaded per collection (pinnable)
    bool fold_inference = true;  // RankingNet::SetInferenceFolding on every loaded fold
    Precision precision = Precision::kFloat32;  // RankingNet::SetInferencePrecision on every loaded fold
  };
  ModelManager(Registry registry, Options options);
  ~ModelManager();

  // Loads, for every collection in the registry, the newest versions not yet loaded
  // (up to keep_versions), and unloads loaded versions the registry no longer lists
  // (Registry::Retire: a rollback), except the last one of a collection. A version that
  // failed once is not retried. Safe to call while requests are served; swaps are
  // atomic and in-flight requests finish on the version they started with.
  // A loaded version whose files change on disk (Registry::VersionStamp: sizes and
  // times, a stat per file) is verified again (its checksums); if it no longer
  // verifies, the server keeps serving the copy it loaded, which is intact, and reports
  // kCorrupted once per change: a replica that starts now would not load it, so
  // replicas may disagree until it is re-published or retired.
  std::vector<ModelEvent> Poll();

  // Polls every `interval` seconds on a background thread; `on_events` sees each poll's
  // events, none included (logging, metrics, registry checks). Stop() (or the
  // destructor) ends it.
  void StartPolling(double interval_seconds, std::function<void(const std::vector<ModelEvent>&)> on_events);
  void Stop();

  // version 0 = the newest loaded. NOT_FOUND names what is loaded.
  absl::StatusOr<ModelHandle> Get(const std::string& collection, int64_t version) const;
  // Newest first for each collection.
  std::map<std::string, std::vector<ModelHandle>> Loaded() const;
  bool AnyLoaded() const;
  int64_t failed_loads() const { return failed_loads_.load(); }
  const Registry& registry() const { return registry_; }

 private:
  // The kCorrupted check of Poll, over the loaded versions still listed.
  void CheckLoadedFiles(std::vector<ModelEvent>* events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  // Poll's steps for one collection of `listed` versions (ascending): the newest
  // keep_versions that load, then the retired ones unloaded. Called with poll_mu_ held;
  // each takes mu_ around what it reads and changes.
  void LoadNewest(const std::string& collection, const std::vector<int64_t>& listed, std::vector<ModelEvent>* events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  void UnloadRetired(const std::string& collection, const std::vector<int64_t>& listed,
                     std::vector<ModelEvent>* events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);

  Registry registry_;
  Options options_;
  absl::Mutex poll_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one Poll at a time
  mutable absl::Mutex mu_;
  std::map<std::string, std::map<int64_t, std::shared_ptr<const LoadedModel>>> models_ ABSL_GUARDED_BY(mu_);
  // Versions that failed to load, with the registry's VersionStamp at that attempt:
  // retried when the stamp changes (a fixed file), not at every poll.
  std::map<std::pair<std::string, int64_t>, std::string> failed_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> failed_loads_{0};
  std::set<std::pair<std::string, int64_t>> vanished_ ABSL_GUARDED_BY(mu_);  // reported vanished versions
  // Loaded versions' VersionStamp when they last verified, and the stamp of a change
  // reported as corrupted (not reported again until it changes).
  std::map<std::pair<std::string, int64_t>, std::string> verified_stamp_ ABSL_GUARDED_BY(mu_),
      corrupt_stamp_ ABSL_GUARDED_BY(mu_);
  std::thread poller_;
  absl::Mutex stop_mu_;
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;  // the poller's thread waits on it
};

}  // namespace tgraph
