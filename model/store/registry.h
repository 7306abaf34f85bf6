// The versioned model registry: <root>/<collection>/<version>/manifest.json plus one
// weight file per fold (TensorFlow Serving / Triton convention). Publishing is atomic
// (staging directory, fsync, rename; concurrent publishers take distinct versions);
// reading verifies completeness and checksums. Torch-free.
//
// Threads and processes: a Registry holds only its root; every method may run on any
// thread, and any number of processes (trainers publishing, servers polling) may use
// one root at once: the file system's renames are what makes each change atomic.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core/model_spec.h"
#include "model/core/preprocess.h"
#include "model/tile/tile_prior.h"
#include "model/tile/tile_space.h"

namespace tgraph {

// The largest inference batch and reference a manifest may ask for.
constexpr int64_t kMaxBatchSize = 65536;
// The largest manifest a registry reads (a real one is a few kB): a larger file is
// DATA_LOSS, never read into memory.
constexpr int64_t kMaxManifestBytes = int64_t{1} << 20;

struct FoldEntry {
  int fold = 0;
  double valid_tau = 0;     // validation metric of the fold (M_tile for tile)
  std::string weights;      // file name inside the version directory
  std::string sha256;       // of that file
};

// What a model was trained on (docs/api.md "Provenance"). The trainer fills it from its
// data: a data root holding tgraph-synth's SYNTHETIC.txt is synthetic, any other is taken
// as real (TpuGraphs files or a farm's own); fine-tuning appends what it learned from.
struct Provenance {
  // "synthetic", "real", or "" (unknown: a manifest written before provenance, or a
  // fine-tune of such a model).
  std::string data;
  std::string dataset;  // SYNTHETIC.txt's first line, or the data root as given
  int64_t graphs = 0;          // training and validation graphs
  int64_t configurations = 0;  // their distinct configurations
  struct Finetune {
    int64_t parent_version = 0;
    std::string parent_collection;  // when another collection's model was the start (finetune --parent)
    int64_t graphs = 0;        // measured graphs it learned from
    int64_t measurements = 0;  // their measured configurations
    std::string created;
  };
  std::vector<Finetune> finetunes;  // oldest first

  // Trained only on synthetic data: to be said wherever the model is served.
  bool SyntheticOnly() const { return data == "synthetic" && finetunes.empty(); }
  // One line for logs and tools, e.g. "synthetic data only (Synthetic ... preset ci,
  // seed 0): 150 graphs, 12,000 configurations" or "real data (DIR): ...; fine-tuned 2x
  // on 40 graphs, 3,100 measurements".
  std::string Summary() const;
};

struct Manifest {
  std::string collection;
  int64_t version = 0;
  std::string created;      // UTC, ISO 8601
  ModelSpec spec;
  FeatureStats stats;
  std::vector<FoldEntry> folds;
  int64_t batch_size = 128; // inference batch (the paper's 128)
  // The cross-attention reference's size when a request does not fix one (model/nn/scoring.h).
  int64_t reference_configs = 256;
  // The reference's groups, each its own softmax (ScoringOptions::reference_groups):
  // ReferenceGroups of the training batch. Manifests without the key get that of the
  // trainer's batch_configs flag, or of its default for the collection.
  int64_t reference_groups = 1;
  // Test-time augmentation passes: only for the batch-softmax scoring of ablations
  // (ScoringOptions::batch_softmax); scoring against a reference makes them pointless.
  int tta = 10;
  std::string data_fingerprint;               // hash of the training data
  std::map<std::string, std::string> training;  // the trainer's flags
  Provenance provenance;
  // A tile collection made from real measurements (tgraph-featurize tiles): the kernel's
  // configurations, legal and refused, that the server checks rows against and searches.
  std::optional<TileSpace> tile_space;
  // Its measured problems' prior, added to the network's scores (model/tile/tile_prior.h);
  // none: the network alone.
  std::optional<TilePrior> tile_prior;

  std::string ToJson() const;
  static absl::StatusOr<Manifest> FromJson(const std::string& json, absl::string_view what);
};

// What Registry::Check found: OK, or why nothing can be served from the registry.
struct RegistryCheck {
  // "" when at least one collection has a servable version; else one of "missing",
  // "not_a_directory", "unreadable", "empty", "no_collection", "no_version" (the
  // tgraph_registry_errors_total label).
  std::string reason;
  std::string message;  // names the path and what was found there
  bool ok() const { return reason.empty(); }
};

class Registry {
 public:
  explicit Registry(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }

  std::string VersionDir(const std::string& collection, int64_t version) const;
  // Complete, not retired versions (directories named by a positive integer holding
  // manifest.json and no RETIRED marker), ascending.
  std::vector<int64_t> ListVersions(const std::string& collection) const;
  // Collections with at least one complete version.
  std::vector<std::string> ListCollections() const;
  // NOT_FOUND when the collection has no version.
  absl::StatusOr<int64_t> LatestVersion(const std::string& collection) const;
  // Whether anything can be served from here, and if not, why: the root is missing, not
  // a directory or unreadable; it is empty; it holds no collection folder (naming what
  // it holds); or no collection has a published, unretired version (naming what each
  // holds). Read errors are reported, never taken for an empty registry.
  RegistryCheck Check() const;

  // A stamp of a version's files (names, sizes, change times, permissions) that changes
  // whenever any of them is written, replaced, renamed or chmod-ed: a server retries a
  // version that failed to load when its stamp changes.
  std::string VersionStamp(const std::string& collection, int64_t version) const;

  // Reads and checks a version: manifest parses, matches its directory, every weight
  // file exists and has the recorded sha256. Errors name the file and the problem.
  absl::StatusOr<Manifest> ReadVersion(const std::string& collection, int64_t version) const;

  // Publishes a new version: copies each fold's weight file (FoldEntry::weights is the
  // source path; the published name is fold_<k>.npz), fills in sha256, version and
  // created, writes everything into a staging directory, fsyncs and renames it to the
  // next free version number. Returns the version.
  // Idempotent: when a live (not retired) version already holds the same model (the
  // same weights, spec, statistics and inference settings), that version is returned and
  // nothing is written; *already_published (if given) says which happened. Staging
  // directories of publishes killed more than an hour ago are removed first.
  absl::StatusOr<int64_t> Publish(Manifest manifest, bool* already_published = nullptr) const;

  // Rollback: retiring a version writes a RETIRED marker (JSON: time, reason) into its
  // directory. The version stays on disk and its number is never reused, but
  // ListVersions no longer lists it, so servers unload it at their next poll and serve
  // the newest remaining version. Restore removes the marker. NOT_FOUND for a version
  // that does not exist; retiring twice or restoring a live version is a no-op.
  absl::Status Retire(const std::string& collection, int64_t version, const std::string& reason) const;
  absl::Status Restore(const std::string& collection, int64_t version) const;
  bool IsRetired(const std::string& collection, int64_t version) const;

 private:
  // Complete versions (numbered directories holding manifest.json), ascending.
  std::vector<int64_t> PublishedVersions(const std::string& collection, bool include_retired) const;
  std::string root_;
};

// The model version a request names when it wants the newest: the newest loaded in a
// server (ModelManager::Get), the newest published in the registry for a tool
// (LoadModelOrLatest). Versions are numbered from 1.
inline constexpr int64_t kLatestVersion = 0;


}  // namespace tgraph
