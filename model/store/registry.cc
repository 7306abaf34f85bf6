#include "model/store/registry.h"

#include "model/core/utc_time.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/core/dataset.h"
#include "model/core/file_util.h"
#include "model/core/sha256.h"
#include "model/store/measurement_store.h"

namespace tgraph {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr char kManifest[] = "manifest.json";

// A manifest's text, bounded by kMaxManifestBytes (checked before reading).
absl::StatusOr<std::string> ReadManifestText(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > static_cast<uintmax_t>(kMaxManifestBytes))
    return absl::DataLossError(absl::StrCat(path, ": ", size, " bytes, over the ", kMaxManifestBytes,
                                            " a manifest may have (a manifest is a few kB): not read"));
  return ReadFile(path);
}
// Bounds on what a manifest may ask of a server.
constexpr int64_t kMaxTta = 64;
constexpr int kMaxFolds = 64;
constexpr char kRetired[] = "RETIRED";
constexpr char kFormat[] = "tgraph.manifest.v1";

void FsyncPath(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

absl::Status CopyFileSynced(const std::string& from, const std::string& to) {
  absl::StatusOr<std::string> data = ReadFile(from);
  if (!data.ok()) return data.status();
  return WriteFileAtomic(to, *data);
}

}  // namespace


std::string Manifest::ToJson() const {
  json j;
  j["format"] = kFormat;
  j["collection"] = collection;
  j["version"] = version;
  j["created"] = created;
  j["spec"] = json::parse(spec.ToJson());
  j["feature_stats"] = json::parse(stats.ToJson());
  j["folds"] = json::array();
  for (const FoldEntry& f : folds)
    j["folds"].push_back({{"fold", f.fold}, {"valid_tau", f.valid_tau}, {"weights", f.weights}, {"sha256", f.sha256}});
  j["inference"] = {{"batch_size", batch_size},
                    {"reference_configs", reference_configs},
                    {"reference_groups", reference_groups},
                    {"tta", tta}};
  j["training"] = {{"data_fingerprint", data_fingerprint}, {"flags", training}};
  if (!provenance.data.empty() || !provenance.finetunes.empty()) {
    json p = {{"data", provenance.data},
              {"dataset", provenance.dataset},
              {"graphs", provenance.graphs},
              {"configurations", provenance.configurations},
              {"finetunes", json::array()}};
    for (const Provenance::Finetune& f : provenance.finetunes)
      p["finetunes"].push_back({{"parent_version", f.parent_version},
                                {"parent_collection", f.parent_collection},
                                {"graphs", f.graphs},
                                {"measurements", f.measurements},
                                {"created", f.created}});
    j["provenance"] = p;
  }
  if (tile_space) j["tile_space"] = json::parse(tile_space->ToJson());
  if (tile_prior) j["tile_prior"] = json::parse(tile_prior->ToJson());
  return j.dump(2);
}

std::string Provenance::Summary() const {
  if (data.empty() && finetunes.empty()) return "provenance unknown (published before manifests recorded it)";
  std::string out = data.empty() ? "data of unknown provenance"
                                 : absl::StrCat(SyntheticOnly() ? "synthetic data only" : absl::StrCat(data, " data"),
                                                " (", dataset, "): ", graphs, " graphs, ", configurations,
                                                " configurations");
  if (!finetunes.empty()) {
    int64_t g = 0, m = 0;
    for (const Finetune& f : finetunes) {
      g += f.graphs;
      m += f.measurements;
    }
    const Finetune& last = finetunes.back();
    absl::StrAppend(&out, "; fine-tuned ", finetunes.size(), "x on ", g, " graphs, ", m, " measurements (last from ",
                    last.parent_collection.empty() ? "" : absl::StrCat(last.parent_collection, " "), "v",
                    last.parent_version, ")");
  }
  return out;
}

namespace {

// manifest["provenance"], when present: every key typed as ToJson writes it.
absl::Status ReadProvenance(const json& j, absl::string_view what, Provenance* p) {
  auto err = [&](absl::string_view key, absl::string_view expected) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": key 'provenance.", key, "' must be ", expected));
  };
  if (!j.is_object()) return err("", "an object");
  for (const char* key : {"data", "dataset"})
    if (!j.contains(key) || !j[key].is_string()) return err(key, "a string");
  for (const char* key : {"graphs", "configurations"})
    if (!j.contains(key) || !j[key].is_number_integer()) return err(key, "an integer");
  p->data = j["data"].get<std::string>();
  if (p->data != "synthetic" && p->data != "real" && !p->data.empty())
    return err("data", "\"synthetic\", \"real\" or \"\" (unknown)");
  p->dataset = j["dataset"].get<std::string>();
  p->graphs = j["graphs"].get<int64_t>();
  p->configurations = j["configurations"].get<int64_t>();
  if (j.contains("finetunes")) {
    if (!j["finetunes"].is_array() || j["finetunes"].size() > 10000) return err("finetunes", "an array (at most 10,000)");
    for (const json& f : j["finetunes"]) {
      if (!f.is_object() || !f.value("parent_version", json()).is_number_integer() ||
          !f.value("graphs", json()).is_number_integer() || !f.value("measurements", json()).is_number_integer() ||
          !f.value("created", json()).is_string())
        return err("finetunes", "objects with parent_version, graphs, measurements and created");
      if (f.contains("parent_collection") && !f["parent_collection"].is_string())
        return err("finetunes", "objects whose parent_collection is a string");
      p->finetunes.push_back({f["parent_version"].get<int64_t>(), f.value("parent_collection", ""),
                              f["graphs"].get<int64_t>(), f["measurements"].get<int64_t>(),
                              f["created"].get<std::string>()});
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The folds: each fold's number, validation tau, weight file (a bare name) and sha256.
absl::Status ReadFolds(const json& j, absl::string_view what, Manifest* m) {
  const auto err = [&](absl::string_view key, absl::string_view expected) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "' must be ", expected));
  };
  if (!j.contains("folds") || !j["folds"].is_array() || j["folds"].empty()) return err("folds", "a non-empty array");
  for (const json& f : j["folds"]) {
    if (!f.is_object() || !f.contains("fold") || !f["fold"].is_number_integer() || !f.contains("weights") ||
        !f["weights"].is_string() || !f.contains("sha256") || !f["sha256"].is_string() || !f.contains("valid_tau") ||
        !f["valid_tau"].is_number())
      return err("folds", "objects with fold, valid_tau, weights and sha256");
    const std::string file = f["weights"].get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file[0] == '.')
      return err("folds", "weight file names without a directory");
    m->folds.push_back({f["fold"].get<int>(), f["valid_tau"].get<double>(), file, f["sha256"].get<std::string>()});
  }
  if (m->folds.size() > static_cast<size_t>(kMaxFolds)) return err("folds", absl::StrCat("at most ", kMaxFolds, " folds"));
  return absl::OkStatus();
}

// The inference settings, bounded so that a manifest can never make a server allocate
// without limit.
absl::Status ReadInference(const json& j, absl::string_view what, Manifest* m) {
  const auto err = [&](absl::string_view key, absl::string_view expected) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "' must be ", expected));
  };
  if (j.contains("inference") && j["inference"].is_object()) {
    const json& inf = j["inference"];
    if (inf.contains("batch_size") && !inf["batch_size"].is_number_integer()) return err("inference.batch_size", "an integer");
    if (inf.contains("tta") && !inf["tta"].is_number_integer()) return err("inference.tta", "an integer");
    if (inf.contains("reference_configs") && !inf["reference_configs"].is_number_integer())
      return err("inference.reference_configs", "an integer");
    if (inf.contains("reference_groups") && !inf["reference_groups"].is_number_integer())
      return err("inference.reference_groups", "an integer");
    m->batch_size = inf.value("batch_size", int64_t{128});
    m->reference_configs = inf.value("reference_configs", int64_t{256});
    m->tta = static_cast<int>(std::clamp<int64_t>(inf.value("tta", int64_t{10}), -1, kMaxTta + 1));
  }
  // Bounded so that a manifest can never make a server allocate without limit.
  if (m->batch_size < 1 || m->batch_size > kMaxBatchSize)
    return err("inference.batch_size", absl::StrCat("in 1..", kMaxBatchSize, ", got ", m->batch_size));
  if (m->tta < 1 || m->tta > kMaxTta) return err("inference.tta", absl::StrCat("in 1..", kMaxTta));
  if (m->reference_configs < 1 || m->reference_configs > kMaxBatchSize)
    return err("inference.reference_configs", absl::StrCat("in 1..", kMaxBatchSize, ", got ", m->reference_configs));
  return absl::OkStatus();
}

// The reference's groups: the manifest's, or for one written before groups, the
// training batch the trainer used (its flags, read first).
absl::Status ReadReferenceGroups(const json& j, absl::string_view what, Manifest* m) {
  const auto err = [&](absl::string_view key, absl::string_view expected) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "' must be ", expected));
  };
  const json* inference = j.contains("inference") && j["inference"].is_object() ? &j["inference"] : nullptr;
  if (inference && inference->contains("reference_groups")) {
    m->reference_groups = (*inference)["reference_groups"].get<int64_t>();
  } else {  // written before groups: the training batch the trainer used
    int64_t batch = 0;
    if (auto it = m->training.find("batch_configs"); it != m->training.end()) (void)absl::SimpleAtoi(it->second, &batch);
    absl::StatusOr<Collection> c = ParseCollection(m->collection);
    if (batch <= 0) batch = c.ok() ? DefaultTrainingBatch(*c) : m->reference_configs;
    m->reference_groups = ReferenceGroups(m->reference_configs, batch);
  }
  if (m->reference_groups < 1 || m->reference_groups > m->reference_configs)
    return err("inference.reference_groups",
               absl::StrCat("in 1..reference_configs (", m->reference_configs, "), got ", m->reference_groups));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Manifest> Manifest::FromJson(const std::string& text, absl::string_view what) {
  json j = json::parse(text, nullptr, false);
  auto err = [&](absl::string_view key, absl::string_view expected) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "' must be ", expected));
  };
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(what, ": not a JSON object"));
  if (j.value("format", "") != kFormat) return err("format", absl::StrCat("\"", kFormat, "\""));
  Manifest m;
  if (!j.contains("collection") || !j["collection"].is_string()) return err("collection", "a string");
  m.collection = j["collection"].get<std::string>();
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() < 1)
    return err("version", "a positive integer");
  m.version = j["version"].get<int64_t>();
  m.created = j.value("created", "");
  if (!j.contains("spec") || !j["spec"].is_object()) return err("spec", "an object");
  absl::StatusOr<ModelSpec> spec = ModelSpec::FromJson(j["spec"].dump(), absl::StrCat(what, ": spec"));
  if (!spec.ok()) return spec.status();
  m.spec = *spec;
  if (!j.contains("feature_stats") || !j["feature_stats"].is_object()) return err("feature_stats", "an object");
  absl::StatusOr<FeatureStats> stats =
      FeatureStats::FromJson(j["feature_stats"].dump(), absl::StrCat(what, ": feature_stats"));
  if (!stats.ok()) return stats.status();
  m.stats = *stats;
  if (absl::Status s = ReadFolds(j, what, &m); !s.ok()) return s;
  if (absl::Status s = ReadInference(j, what, &m); !s.ok()) return s;
  if (j.contains("training") && j["training"].is_object()) {
    m.data_fingerprint = j["training"].value("data_fingerprint", "");
    if (j["training"].contains("flags") && j["training"]["flags"].is_object())
      for (auto& [k, v] : j["training"]["flags"].items()) m.training[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  if (j.contains("provenance"))
    if (absl::Status s = ReadProvenance(j["provenance"], what, &m.provenance); !s.ok()) return s;
  if (j.contains("tile_space")) {
    absl::StatusOr<TileSpace> space = TileSpace::FromJson(j["tile_space"].dump(), absl::StrCat(what, ": tile_space"));
    if (!space.ok()) return space.status();
    m.tile_space = std::move(*space);
  }
  if (j.contains("tile_prior")) {
    absl::StatusOr<TilePrior> prior = TilePrior::FromJson(j["tile_prior"].dump(), absl::StrCat(what, ": tile_prior"));
    if (!prior.ok()) return prior.status();
    m.tile_prior = std::move(*prior);
    // A farm's problems fine-tuned before kernels named their GPU ran on the space's.
    if (m.tile_space) {
      std::vector<MeasuredSlowdowns::Problem> problems = m.tile_prior->measured.problems();
      for (MeasuredSlowdowns::Problem& q : problems)
        if (!q.kernel.empty()) q.kernel = KernelKeyOnGpu(q.kernel, m.tile_space->gpu);
      m.tile_prior->measured = MeasuredSlowdowns(m.tile_prior->measured.tiles(), std::move(problems));
    }
  }
  if (absl::Status s = ReadReferenceGroups(j, what, &m); !s.ok()) return s;
  return m;
}

std::string Registry::VersionDir(const std::string& collection, int64_t version) const {
  return absl::StrCat(root_, "/", collection, "/", version);
}

std::vector<int64_t> Registry::PublishedVersions(const std::string& collection, bool include_retired) const {
  std::vector<int64_t> out;
  std::error_code ec;
  const std::string dir = absl::StrCat(root_, "/", collection);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    int64_t v = 0;
    const std::string name = it->path().filename().string();
    if (!absl::SimpleAtoi(name, &v) || v < 1 || absl::StrCat(v) != name) continue;
    if (!fs::is_regular_file(it->path() / kManifest, ec)) continue;
    if (include_retired || !fs::exists(it->path() / kRetired, ec)) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> Registry::ListVersions(const std::string& collection) const {
  return PublishedVersions(collection, /*include_retired=*/false);
}

std::vector<std::string> Registry::ListCollections() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && !ListVersions(it->path().filename().string()).empty())
      out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// Up to `max` names, quoted, then how many more.
std::string SomeNames(const std::vector<std::string>& names, size_t max = 5) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < max; ++i) absl::StrAppend(&out, i ? ", " : "", "'", names[i], "'");
  if (names.size() > max) absl::StrAppend(&out, " and ", names.size() - max, " more");
  return out;
}

}  // namespace

RegistryCheck Registry::Check() const {
  std::error_code ec;
  const fs::file_status st = fs::status(root_, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    return {"unreadable", absl::StrCat("registry ", root_, ": cannot read: ", ec.message())};
  if (!fs::exists(st))
    return {"missing", absl::StrCat("registry ", root_, " does not exist (a wrong --registry, or a volume not mounted?)")};
  if (!fs::is_directory(st)) return {"not_a_directory", absl::StrCat("registry ", root_, " is not a directory")};
  std::vector<std::string> collections, others;
  fs::directory_iterator it(root_, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (it->is_directory(type_ec) && ParseCollection(name).ok()) collections.push_back(name);
    else if (name.rfind(".staging-", 0) != 0) others.push_back(name);
  }
  if (ec) return {"unreadable", absl::StrCat("registry ", root_, ": cannot list: ", ec.message())};
  std::sort(collections.begin(), collections.end());
  std::sort(others.begin(), others.end());
  if (collections.empty() && others.empty())
    return {"empty", absl::StrCat("registry ", root_, " is empty: publish a model into it (tgraph-train ... --registry ",
                                  root_, ")")};
  if (collections.empty())
    return {"no_collection",
            absl::StrCat("registry ", root_, " holds no collection folder: found ", SomeNames(others),
                         " (expected folders named like layout:xla:random or tile:xla, holding numbered versions)")};
  std::vector<std::string> found;
  for (const std::string& c : collections) {
    if (!ListVersions(c).empty()) return {};
    int64_t versions = 0, without_manifest = 0, retired = 0;
    const fs::path dir = fs::path(root_) / c;
    std::error_code list_ec;
    for (fs::directory_iterator v(dir, list_ec), vend; !list_ec && v != vend; v.increment(list_ec)) {
      int64_t n = 0;
      const std::string name = v->path().filename().string();
      if (!absl::SimpleAtoi(name, &n) || n < 1 || absl::StrCat(n) != name) continue;
      ++versions;
      std::error_code f_ec;
      if (!fs::is_regular_file(v->path() / kManifest, f_ec)) ++without_manifest;
      else if (fs::exists(v->path() / kRetired, f_ec)) ++retired;
    }
    if (list_ec)
      return {"unreadable", absl::StrCat("registry ", root_, ": cannot list ", dir.string(), ": ", list_ec.message())};
    found.push_back(versions == 0 ? absl::StrCat(c, ": no version folder")
                                  : absl::StrCat(c, ": ", versions, " version folder(s), ", without_manifest, " without ",
                                                 kManifest, ", ", retired, " retired"));
  }
  std::string what;
  for (const std::string& f : found) absl::StrAppend(&what, what.empty() ? "" : "; ", f);
  return {"no_version", absl::StrCat("registry ", root_, " has no servable version: ", what)};
}

absl::StatusOr<int64_t> Registry::LatestVersion(const std::string& collection) const {
  std::vector<int64_t> v = ListVersions(collection);
  if (v.empty())
    return absl::NotFoundError(absl::StrCat("registry ", root_, ": collection '", collection, "' has no version"));
  return v.back();
}

bool Registry::IsRetired(const std::string& collection, int64_t version) const {
  std::error_code ec;
  return fs::exists(absl::StrCat(VersionDir(collection, version), "/", kRetired), ec);
}

namespace {

absl::Status CheckPublished(const std::string& dir, absl::string_view what) {
  std::error_code ec;
  if (fs::is_regular_file(absl::StrCat(dir, "/", kManifest), ec)) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat(what, ": ", dir, " is not a published version (no ", kManifest, ")"));
}

}  // namespace

absl::Status Registry::Retire(const std::string& collection, int64_t version, const std::string& reason) const {
  const std::string dir = VersionDir(collection, version);
  if (absl::Status s = CheckPublished(dir, "retire"); !s.ok()) return s;
  if (IsRetired(collection, version)) return absl::OkStatus();
  const json marker = {{"retired", UtcNow()}, {"reason", reason}};
  if (absl::Status s = WriteFileAtomic(absl::StrCat(dir, "/", kRetired), marker.dump(1) + "\n"); !s.ok()) return s;
  FsyncPath(dir, true);
  return absl::OkStatus();
}

absl::Status Registry::Restore(const std::string& collection, int64_t version) const {
  const std::string dir = VersionDir(collection, version);
  if (absl::Status s = CheckPublished(dir, "restore"); !s.ok()) return s;
  std::error_code ec;
  fs::remove(absl::StrCat(dir, "/", kRetired), ec);
  if (ec) return absl::InternalError(absl::StrCat("restore: cannot remove ", dir, "/", kRetired, ": ", ec.message()));
  FsyncPath(dir, true);
  return absl::OkStatus();
}

std::string Registry::VersionStamp(const std::string& collection, int64_t version) const {
  std::vector<std::string> entries;
  std::error_code ec;
  for (fs::directory_iterator it(VersionDir(collection, version), ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st {};
    const std::string path = it->path().string();
    if (::stat(path.c_str(), &st) != 0) {
      entries.push_back(absl::StrCat(it->path().filename().string(), ":unreadable:", errno));
      continue;
    }
    entries.push_back(absl::StrCat(it->path().filename().string(), ":", st.st_size, ":", st.st_mode, ":",
                                   st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec, ":", st.st_mtim.tv_sec, ".",
                                   st.st_mtim.tv_nsec));
  }
  if (ec) entries.push_back(absl::StrCat("list-error:", ec.value()));
  std::sort(entries.begin(), entries.end());
  return absl::StrJoin(entries, "|");
}

absl::StatusOr<Manifest> Registry::ReadVersion(const std::string& collection, int64_t version) const {
  const std::string dir = VersionDir(collection, version);
  const std::string path = absl::StrCat(dir, "/", kManifest);
  absl::StatusOr<std::string> text = ReadManifestText(path);
  if (!text.ok() && text.status().code() == absl::StatusCode::kDataLoss) return text.status();
  if (!text.ok())
    return absl::NotFoundError(absl::StrCat("model ", collection, " version ", version, ": ", text.status().message()));
  absl::StatusOr<Manifest> m = Manifest::FromJson(*text, path);
  if (!m.ok()) return m.status();
  if (m->collection != collection || m->version != version)
    return absl::DataLossError(absl::StrCat(path, ": describes ", m->collection, " version ", m->version,
                                            " but lies in the directory of ", collection, " version ", version));
  // Every file read must lie inside the registry: a symbolic link out of it (the version
  // folder or a weight file) is refused rather than followed.
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(root_, ec);
  auto inside = [&](const std::string& p) {
    std::error_code e;
    const fs::path real = fs::weakly_canonical(p, e);
    if (e) return false;
    const fs::path rel = real.lexically_relative(root);
    return !rel.empty() && *rel.begin() != "..";
  };
  if (ec || !inside(path))
    return absl::PermissionDeniedError(absl::StrCat(path, ": resolves outside the registry ", root_, " (a symbolic link?)"));
  for (const FoldEntry& f : m->folds) {
    const std::string file = absl::StrCat(dir, "/", f.weights);
    if (!inside(file))
      return absl::PermissionDeniedError(
          absl::StrCat(file, ": resolves outside the registry ", root_, " (a symbolic link?); not read"));
    absl::StatusOr<std::string> sha = Sha256File(file);
    if (!sha.ok())
      return absl::DataLossError(absl::StrCat(path, ": fold ", f.fold, " weight file is missing: ", sha.status().message()));
    if (*sha != f.sha256)
      return absl::DataLossError(absl::StrCat(file, ": checksum mismatch (manifest ", f.sha256, ", file ", *sha,
                                              "): the file is corrupt or was changed"));
  }
  return m;
}

namespace {

// A manifest's model, without what differs between two publishes of it.
std::string ModelIdentity(Manifest m) {
  m.version = 0;
  m.created.clear();
  return m.ToJson();
}

// Removes `.staging-*` directories in `dir` not modified for an hour: what killed
// publishes leave. A live publish writes its staging directory within seconds.
void RemoveStaleStaging(const std::string& dir) {
  std::error_code ec;
  const auto cutoff = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e;
    if (it->path().filename().string().rfind(".staging-", 0) == 0 && it->is_directory(e) &&
        fs::last_write_time(it->path(), e) < cutoff && !e)
      fs::remove_all(it->path(), e);
  }
}

}  // namespace

absl::StatusOr<int64_t> Registry::Publish(Manifest m, bool* already_published) const {
  if (already_published) *already_published = false;
  const std::string coll_dir = absl::StrCat(root_, "/", m.collection);
  std::error_code ec;
  fs::create_directories(coll_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(coll_dir, ": cannot create: ", ec.message()));
  RemoveStaleStaging(coll_dir);
  // The model as it would be published; if a live version holds it, that is the answer.
  std::vector<std::string> sources;
  Manifest candidate = m;
  for (FoldEntry& f : candidate.folds) {
    absl::StatusOr<std::string> sha = Sha256File(f.weights);
    if (!sha.ok()) return sha.status();
    sources.push_back(f.weights);
    f.weights = absl::StrCat("fold_", f.fold, ".npz");
    f.sha256 = *sha;
  }
  const std::string identity = ModelIdentity(candidate);
  for (int64_t v : ListVersions(m.collection)) {
    absl::StatusOr<std::string> text = ReadManifestText(absl::StrCat(VersionDir(m.collection, v), "/", kManifest));
    if (!text.ok()) continue;
    absl::StatusOr<Manifest> existing = Manifest::FromJson(*text, "manifest");
    if (existing.ok() && ModelIdentity(*existing) == identity) {
      if (already_published) *already_published = true;
      return v;
    }
  }
  std::random_device rd;
  const std::string staging = absl::StrCat(coll_dir, "/.staging-", getpid(), "-", rd());
  fs::create_directories(staging, ec);
  if (ec) return absl::InternalError(absl::StrCat(staging, ": cannot create: ", ec.message()));
  auto cleanup = [&] { fs::remove_all(staging, ec); };
  m = candidate;
  for (size_t i = 0; i < m.folds.size(); ++i) {
    const FoldEntry& f = m.folds[i];
    if (absl::Status s = CopyFileSynced(sources[i], absl::StrCat(staging, "/", f.weights)); !s.ok()) {
      cleanup();
      return s;
    }
    absl::StatusOr<std::string> sha = Sha256File(absl::StrCat(staging, "/", f.weights));
    if (!sha.ok() || *sha != f.sha256) {
      cleanup();
      return sha.ok() ? absl::DataLossError(absl::StrCat(sources[i], ": changed while it was being published"))
                      : sha.status();
    }
  }
  m.created = UtcNow();
  // Take the number after the highest published one, retired versions included (their
  // numbers are never reused); a concurrent publisher that renamed first makes our
  // rename fail (the target exists and is not empty), and we try the next one.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::vector<int64_t> published = PublishedVersions(m.collection, /*include_retired=*/true);
    m.version = (published.empty() ? 0 : published.back()) + 1 + attempt;
    if (absl::Status s = WriteFileAtomic(absl::StrCat(staging, "/", kManifest), m.ToJson()); !s.ok()) {
      cleanup();
      return s;
    }
    FsyncPath(staging, true);
    const std::string target = VersionDir(m.collection, m.version);
    if (::rename(staging.c_str(), target.c_str()) == 0) {
      FsyncPath(coll_dir, true);
      return m.version;
    }
    if (errno != EEXIST && errno != ENOTEMPTY) {
      const std::string msg = std::strerror(errno);
      cleanup();
      return absl::InternalError(absl::StrCat("publish ", target, ": rename failed: ", msg));
    }
  }
  cleanup();
  return absl::InternalError(absl::StrCat("publish ", m.collection, ": no free version number"));
}

}  // namespace tgraph
