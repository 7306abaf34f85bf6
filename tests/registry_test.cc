#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "model/core/file_util.h"
#include "model/store/registry.h"
#include "tests/test_util.h"

using namespace tgraph;

namespace {

// A manifest whose fold weights are two small files in `dir`.
Manifest TestManifest(const std::string& dir, const std::string& tag = "a") {
  Manifest m;
  m.collection = "layout:xla:random";
  m.spec.hidden = 64;
  m.stats.count = 10;
  m.stats.mean[3] = 1.5;
  m.stats.std[3] = 0.25;
  m.data_fingerprint = "abc";
  m.training = {{"epochs", "3"}, {"seed", "7"}};
  for (int k : {0, 2}) {
    const std::string src = dir + "/w" + tag + std::to_string(k);
    std::ofstream(src) << "weights of fold " << k << " " << tag;
    m.folds.push_back({k, 0.5 + k, src, ""});
  }
  return m;
}

}  // namespace

TEST_CASE("manifest JSON round trip", "[registry]") {
  TempDir dir;
  Manifest m = TestManifest(dir.path());
  m.version = 3;
  m.folds[0].sha256 = "ff";
  for (FoldEntry& f : m.folds) f.weights = "fold_" + std::to_string(f.fold) + ".npz";
  auto back = Manifest::FromJson(m.ToJson(), "m.json");
  REQUIRE(back.ok());
  CHECK(back->collection == m.collection);
  CHECK(back->version == 3);
  CHECK(back->spec.hidden == 64);
  CHECK(back->stats.mean[3] == 1.5);
  CHECK(back->folds.size() == 2);
  CHECK(back->folds[1].fold == 2);
  CHECK(back->folds[1].valid_tau == 2.5);
  CHECK(back->folds[1].weights == "fold_2.npz");
  CHECK(back->folds[0].sha256 == "ff");
  CHECK(back->training.at("epochs") == "3");
  CHECK(back->batch_size == 128);
  CHECK(back->tta == 10);
  CHECK(back->reference_configs == 256);
  // A weight file must lie inside the version directory.
  m.folds[0].weights = "../../etc/passwd";
  auto escape = Manifest::FromJson(m.ToJson(), "m.json");
  REQUIRE_FALSE(escape.ok());
  CHECK_THAT(std::string(escape.status().message()), Catch::Contains("without a directory"));
  auto bad = Manifest::FromJson(R"({"format": "tgraph.manifest.v1", "collection": "x", "version": 0})", "m.json");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("m.json: key 'version' must be a positive integer"));
}

TEST_CASE("model spec JSON: the cross-attention form round trips, and old manifests mean the paper's", "[registry]") {
  ModelSpec spec;
  CHECK(spec.cross_attention_form == CrossAttentionForm::kStandardized);  // what new models train with
  spec.cross_attention_form = CrossAttentionForm::kPaper;
  auto back = ModelSpec::FromJson(spec.ToJson(), "spec");
  REQUIRE(back.ok());
  CHECK(back->cross_attention_form == CrossAttentionForm::kPaper);
  // A manifest written before the key existed: those models were trained with the paper's form.
  const std::string old = R"({"architecture": "tgraph", "kind": "layout", "hidden": 64, "blocks": 2,
      "layout_embedding": 4, "opcode_embedding": 16, "se_reduction": 8, "self_attention": true,
      "cross_attention": true, "edges": true})";
  auto legacy = ModelSpec::FromJson(old, "m.json");
  REQUIRE(legacy.ok());
  CHECK(legacy->cross_attention_form == CrossAttentionForm::kPaper);
  auto bad = ModelSpec::FromJson(old.substr(0, old.size() - 1) + R"(, "cross_attention_form": "cosine"})", "m.json");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()),
             Catch::Contains("m.json: cross_attention_form must be paper or standardized, got 'cosine'"));
  auto wrong_type = ModelSpec::FromJson(old.substr(0, old.size() - 1) + R"(, "cross_attention_form": 2})", "m.json");
  REQUIRE_FALSE(wrong_type.ok());
  CHECK_THAT(std::string(wrong_type.status().message()), Catch::Contains("key 'cross_attention_form' must be a string"));
}

TEST_CASE("model spec JSON: a tile head's depth round trips, old tile manifests have one layer, and it is bounded", "[registry]") {
  ModelSpec spec;
  spec.kind = CollectionKind::kTile;
  CHECK(spec.tile_head_layers == 3);  // what new tile models train with
  auto back = ModelSpec::FromJson(spec.ToJson(), "spec");
  REQUIRE(back.ok());
  CHECK(back->tile_head_layers == 3);
  const std::string old = R"({"architecture": "tgraph", "kind": "tile", "hidden": 64, "blocks": 2,
      "layout_embedding": 4, "opcode_embedding": 16, "se_reduction": 8, "self_attention": true,
      "cross_attention": true, "edges": true, "cross_attention_form": "standardized"})";
  auto legacy = ModelSpec::FromJson(old, "m.json");
  REQUIRE(legacy.ok());
  CHECK(legacy->tile_head_layers == 1);
  auto deep = ModelSpec::FromJson(old.substr(0, old.size() - 1) + R"(, "tile_head_layers": 9})", "m.json");
  CHECK_THAT(std::string(deep.status().message()), Catch::Contains("m.json: tile_head_layers must be 1..8, got 9"));
}

TEST_CASE("a manifest's tile space round trips, and a corrupt one is refused naming the key", "[registry]") {
  Manifest m;
  m.collection = "tile@h100-triton";
  m.version = 1;
  m.spec.kind = CollectionKind::kTile;
  m.folds.push_back({0, 0.9, "fold_0.npz", "ab"});
  TileSpace space;
  space.gpu = "GPU";
  space.sm_count = 132;
  space.block_m = {32, 64}, space.block_n = {32}, space.block_k = {32}, space.num_warps = {4}, space.num_stages = {2, 3};
  space.refused["f32"] = {{64, 32, 32, 4, 3}};
  space.dtypes = {"bf16", "f32"};
  space.variants = {"bf16", "f32"};
  m.tile_space = space;
  auto back = Manifest::FromJson(m.ToJson(), "manifest.json");
  INFO(back.status().message());
  REQUIRE(back.ok());
  REQUIRE(back->tile_space.has_value());
  CHECK(back->tile_space->ToJson() == space.ToJson());
  m.tile_space.reset();
  auto none = Manifest::FromJson(m.ToJson(), "manifest.json");
  REQUIRE(none.ok());
  CHECK_FALSE(none->tile_space.has_value());
  std::string text = Manifest{*back}.ToJson();
  text.replace(text.find("\"sm_count\": 132"), 15, "\"sm_count\": -1 ");
  auto bad = Manifest::FromJson(text, "manifest.json");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("manifest.json: tile_space: sm_count must be in 1..100000"));
}

TEST_CASE("architecture and cross-attention form names parse to their enums and back, and others are refused", "[registry]") {
  for (Architecture a : {Architecture::kTGraph, Architecture::kTpuGraphsBaseline})
    CHECK(*ParseArchitecture(ArchitectureName(a)) == a);
  CHECK(std::string(ArchitectureName(Architecture::kTpuGraphsBaseline)) == "tpugraphs-baseline");
  CHECK_THAT(std::string(ParseArchitecture("gat").status().message()),
             Catch::Equals("architecture 'gat' is unknown; expected tgraph or tpugraphs-baseline"));
  for (CrossAttentionForm f : {CrossAttentionForm::kPaper, CrossAttentionForm::kStandardized})
    CHECK(*ParseCrossAttentionForm(CrossAttentionFormName(f)) == f);
  CHECK(ParseCrossAttentionForm("Paper").status().code() == absl::StatusCode::kInvalidArgument);
  // In a manifest the error names the file.
  ModelSpec spec;
  std::string json = spec.ToJson();
  json.replace(json.find("\"tgraph\""), 8, "\"gat\"");
  auto bad = ModelSpec::FromJson(json, "m.json");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::StartsWith("m.json: architecture 'gat' is unknown"));
}

TEST_CASE("publish makes complete, checksummed, growing versions", "[registry]") {
  TempDir dir;
  Registry reg(dir.path() + "/registry");
  CHECK(reg.LatestVersion("layout:xla:random").status().code() == absl::StatusCode::kNotFound);
  auto v1 = reg.Publish(TestManifest(dir.path()));
  REQUIRE(v1.ok());
  CHECK(*v1 == 1);
  auto v2 = reg.Publish(TestManifest(dir.path(), "b"));
  REQUIRE(v2.ok());
  CHECK(*v2 == 2);
  CHECK(reg.ListVersions("layout:xla:random") == std::vector<int64_t>{1, 2});
  CHECK(reg.ListCollections() == std::vector<std::string>{"layout:xla:random"});
  auto m = reg.ReadVersion("layout:xla:random", 2);
  REQUIRE(m.ok());
  CHECK(m->version == 2);
  CHECK(m->folds[0].weights == "fold_0.npz");
  CHECK(m->folds[1].weights == "fold_2.npz");
  CHECK(m->folds[0].sha256.size() == 64);
  CHECK(*ReadFile(reg.VersionDir("layout:xla:random", 2) + "/fold_2.npz") == "weights of fold 2 b");
  CHECK_FALSE(m->created.empty());
  // Nothing but the version directories is left behind.
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path() + "/registry/layout:xla:random")) {
    ++entries;
    CHECK(e.path().filename().string().rfind(".staging", 0) != 0);
  }
  CHECK(entries == 2);
}

TEST_CASE("retiring a version hides it without reusing its number, and restore brings it back", "[registry]") {
  TempDir dir;
  Registry reg(dir.path() + "/registry");
  const std::string c = "layout:xla:random";
  REQUIRE(reg.Publish(TestManifest(dir.path())).ok());
  REQUIRE(reg.Publish(TestManifest(dir.path(), "b")).ok());
  REQUIRE(reg.Publish(TestManifest(dir.path(), "c")).ok());
  REQUIRE(reg.Retire(c, 3, "tau dropped on the canary").ok());
  CHECK(reg.IsRetired(c, 3));
  CHECK_FALSE(reg.IsRetired(c, 2));
  CHECK(reg.ListVersions(c) == std::vector<int64_t>{1, 2});
  CHECK(*reg.LatestVersion(c) == 2);
  const std::string marker = *ReadFile(reg.VersionDir(c, 3) + "/RETIRED");
  CHECK_THAT(marker, Catch::Contains("tau dropped on the canary"));
  CHECK(reg.ReadVersion(c, 3).ok());  // the files stay, intact
  CHECK(reg.Retire(c, 3, "again").ok());  // idempotent
  // The next publish does not take the retired number.
  auto v = reg.Publish(TestManifest(dir.path(), "d"));
  REQUIRE(v.ok());
  CHECK(*v == 4);
  CHECK(reg.ListVersions(c) == std::vector<int64_t>{1, 2, 4});
  REQUIRE(reg.Restore(c, 3).ok());
  CHECK(reg.ListVersions(c) == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(reg.Restore(c, 3).ok());  // restoring a live version is a no-op
  // Errors name the version directory.
  absl::Status missing = reg.Retire(c, 9, "");
  CHECK(missing.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.message()), Catch::Contains("/9 is not a published version"));
  CHECK(reg.Restore("tile:xla", 1).code() == absl::StatusCode::kNotFound);
  // Retiring every version empties the listing (servers keep their last loaded one).
  for (int64_t k : {1, 2, 3, 4}) REQUIRE(reg.Retire(c, k, "").ok());
  CHECK(reg.ListVersions(c).empty());
  CHECK(reg.ListCollections().empty());
}

TEST_CASE("concurrent publishers never clobber each other", "[registry]") {
  TempDir dir;
  Registry reg(dir.path() + "/registry");
  constexpr int kPublishers = 8;
  std::vector<Manifest> manifests;
  for (int i = 0; i < kPublishers; ++i) manifests.push_back(TestManifest(dir.path(), "p" + std::to_string(i)));
  std::vector<int64_t> versions(kPublishers, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kPublishers; ++i)
    threads.emplace_back([&, i] {
      auto v = reg.Publish(manifests[i]);
      versions[i] = v.ok() ? *v : -1;
    });
  for (auto& t : threads) t.join();
  CHECK(std::set<int64_t>(versions.begin(), versions.end()).size() == kPublishers);
  CHECK(reg.ListVersions("layout:xla:random").size() == kPublishers);
  for (int i = 0; i < kPublishers; ++i) {
    REQUIRE(versions[i] > 0);
    // Each version holds exactly its own publisher's files.
    CHECK(*ReadFile(reg.VersionDir("layout:xla:random", versions[i]) + "/fold_0.npz") ==
          "weights of fold 0 p" + std::to_string(i));
    CHECK(reg.ReadVersion("layout:xla:random", versions[i]).ok());
  }
}

TEST_CASE("incomplete and corrupt versions are reported precisely", "[registry]") {
  TempDir dir;
  Registry reg(dir.path() + "/registry");
  REQUIRE(reg.Publish(TestManifest(dir.path())).ok());
  const std::string v1 = reg.VersionDir("layout:xla:random", 1);

  // A half-written directory (no manifest) and a staging directory are not versions.
  std::filesystem::create_directories(dir.path() + "/registry/layout:xla:random/2");
  std::filesystem::create_directories(dir.path() + "/registry/layout:xla:random/.staging-1-2");
  CHECK(reg.ListVersions("layout:xla:random") == std::vector<int64_t>{1});
  CHECK(*reg.LatestVersion("layout:xla:random") == 1);

  SECTION("a changed weight file fails its checksum") {
    std::ofstream(v1 + "/fold_2.npz", std::ios::app) << "x";
    auto r = reg.ReadVersion("layout:xla:random", 1);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kDataLoss);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("fold_2.npz: checksum mismatch"));
  }
  SECTION("a missing weight file") {
    std::filesystem::remove(v1 + "/fold_0.npz");
    auto r = reg.ReadVersion("layout:xla:random", 1);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("fold 0 weight file is missing"));
  }
  SECTION("a broken manifest") {
    std::ofstream(v1 + "/manifest.json") << "{\"format\": \"tgraph.manifest.v1\", \"collection\": 5}";
    auto r = reg.ReadVersion("layout:xla:random", 1);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("manifest.json: key 'collection' must be a string"));
  }
  SECTION("a manifest copied into another version's directory") {
    std::filesystem::create_directories(dir.path() + "/registry/layout:xla:random/5");
    for (auto f : {"manifest.json", "fold_0.npz", "fold_2.npz"})
      std::filesystem::copy_file(v1 + "/" + f, dir.path() + "/registry/layout:xla:random/5/" + f);
    auto r = reg.ReadVersion("layout:xla:random", 5);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("describes layout:xla:random version 1"));
  }
  SECTION("an oversized manifest is not read") {
    // Valid JSON with 2 MiB of trailing whitespace: refused by its size, not parsed.
    std::ofstream(v1 + "/manifest.json", std::ios::app) << std::string(2 << 20, ' ');
    auto r = reg.ReadVersion("layout:xla:random", 1);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kDataLoss);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("manifest.json: ") && Catch::Contains("over the 1048576"));
  }
  SECTION("an unknown version is NOT_FOUND") {
    CHECK(reg.ReadVersion("layout:xla:random", 9).status().code() == absl::StatusCode::kNotFound);
  }
}

TEST_CASE("Registry::Check says why nothing can be served, naming what it found", "[registry]") {
  TempDir dir;
  const std::string root = dir.path() + "/registry";
  auto check = [&] { return Registry(root).Check(); };
  CHECK(check().reason == "missing");
  CHECK_THAT(check().message, Catch::Contains(root + " does not exist"));
  std::ofstream(root) << "a file";
  CHECK(check().reason == "not_a_directory");
  std::filesystem::remove(root);
  std::filesystem::create_directories(root);
  CHECK(check().reason == "empty");
  CHECK_THAT(check().message, Catch::Contains("is empty"));
  std::filesystem::create_directories(root + "/models");
  std::filesystem::create_directories(root + "/v1");
  CHECK(check().reason == "no_collection");
  CHECK_THAT(check().message, Catch::Contains("found 'models', 'v1'"));
  // A collection folder whose only version has no manifest (a publish killed midway).
  std::filesystem::create_directories(root + "/layout:xla:random/1");
  CHECK(check().reason == "no_version");
  CHECK_THAT(check().message, Catch::Contains("layout:xla:random: 1 version folder(s), 1 without manifest.json, 0 retired"));
  std::filesystem::remove_all(root + "/layout:xla:random");
  const int64_t v = *Registry(root).Publish(TestManifest(dir.path()));
  CHECK(check().ok());
  REQUIRE(Registry(root).Retire("layout:xla:random", v, "test").ok());
  CHECK(check().reason == "no_version");
  CHECK_THAT(check().message, Catch::Contains("1 retired"));
  // An unreadable registry is a read error, not an empty one.
  if (::geteuid() == 0) {
    WARN("running as root: permissions do not apply; the unreadable case is skipped");
    return;
  }
  std::filesystem::permissions(root, std::filesystem::perms::none);
  CHECK(check().reason == "unreadable");
  CHECK_THAT(check().message, Catch::Contains("Permission denied"));
  std::filesystem::permissions(root, std::filesystem::perms::owner_all);
}

TEST_CASE("manifest values are bounded and typed and a wrong type is an error not a crash", "[registry]") {
  TempDir dir;
  Manifest m = TestManifest(dir.path());
  m.version = 1;
  for (auto& f : m.folds) f.weights = "fold_" + std::to_string(f.fold) + ".npz";
  nlohmann::json j = nlohmann::json::parse(m.ToJson());
  auto parse = [&](const nlohmann::json& v) { return Manifest::FromJson(v.dump(), "m.json"); };
  REQUIRE(parse(j).ok());
  nlohmann::json big = j;
  big["inference"]["batch_size"] = int64_t{1000000000000};
  CHECK_THAT(std::string(parse(big).status().message()), Catch::Contains("'inference.batch_size' must be in 1..65536"));
  nlohmann::json text = j;
  text["inference"]["batch_size"] = "large";
  CHECK_THAT(std::string(parse(text).status().message()), Catch::Contains("'inference.batch_size' must be an integer"));
  nlohmann::json tta = j;
  tta["inference"]["tta"] = 1000;
  CHECK_THAT(std::string(parse(tta).status().message()), Catch::Contains("'inference.tta' must be in 1..64"));
  nlohmann::json reference = j;
  reference["inference"]["reference_configs"] = 0;
  CHECK_THAT(std::string(parse(reference).status().message()),
             Catch::Contains("'inference.reference_configs' must be in 1..65536, got 0"));
  nlohmann::json groups = j;
  groups["inference"]["reference_groups"] = 300;
  CHECK_THAT(std::string(parse(groups).status().message()),
             Catch::Contains("'inference.reference_groups' must be in 1..reference_configs (256), got 300"));
  // Written before the groups: those of the training batch the trainer recorded, or of
  // its default for the collection (64 for the default collections, 128 otherwise).
  nlohmann::json old = j;
  old["inference"].erase("reference_groups");
  old["inference"].erase("reference_configs");
  old["collection"] = "layout:xla:default";
  old["training"]["flags"]["batch_configs"] = "0";
  CHECK(parse(old)->reference_configs == 256);
  CHECK(parse(old)->reference_groups == 4);
  old["training"]["flags"]["batch_configs"] = "32";
  CHECK(parse(old)->reference_groups == 8);
  old["collection"] = "layout:nlp:random";
  old["training"]["flags"].erase("batch_configs");
  CHECK(parse(old)->reference_groups == 2);
}

TEST_CASE("a manifest's provenance round trips, is unknown when absent, and is typed", "[registry]") {
  TempDir dir;
  Manifest m = TestManifest(dir.path());
  m.version = 1;
  for (auto& f : m.folds) f.weights = "fold_" + std::to_string(f.fold) + ".npz";
  auto parse = [&](const nlohmann::json& v) { return Manifest::FromJson(v.dump(), "m.json"); };
  // Absent (a manifest published before provenance): unknown, and said so.
  nlohmann::json j = nlohmann::json::parse(m.ToJson());
  CHECK_FALSE(j.contains("provenance"));
  REQUIRE(parse(j).ok());
  CHECK(parse(j)->provenance.data.empty());
  CHECK(parse(j)->provenance.Summary() == "provenance unknown (published before manifests recorded it)");
  // Synthetic, then fine-tuned twice on measurements: no longer synthetic only.
  m.provenance = {"synthetic", "tgraph-synth preset ci, seed 0", 150, 12000, {}};
  CHECK(m.provenance.SyntheticOnly());
  CHECK(m.provenance.Summary() == "synthetic data only (tgraph-synth preset ci, seed 0): 150 graphs, 12000 configurations");
  m.provenance.finetunes = {{1, "", 3, 100, "2026-11-23T00:00:00Z"}, {2, "", 5, 250, "2026-11-24T00:00:00Z"}};
  auto back = parse(nlohmann::json::parse(m.ToJson()));
  REQUIRE(back.ok());
  CHECK_FALSE(back->provenance.SyntheticOnly());
  REQUIRE(back->provenance.finetunes.size() == 2u);
  CHECK(back->provenance.finetunes[1].created == "2026-11-24T00:00:00Z");
  CHECK(back->provenance.Summary() == "synthetic data (tgraph-synth preset ci, seed 0): 150 graphs, 12000 "
                                      "configurations; fine-tuned 2x on 8 graphs, 350 measurements (last from v2)");
  // Typed: a wrong value names the key.
  nlohmann::json bad = nlohmann::json::parse(m.ToJson());
  bad["provenance"]["data"] = "simulated";
  CHECK_THAT(std::string(parse(bad).status().message()),
             Catch::Contains("m.json: key 'provenance.data' must be \"synthetic\", \"real\" or \"\" (unknown)"));
  bad = nlohmann::json::parse(m.ToJson());
  bad["provenance"]["graphs"] = "many";
  CHECK_THAT(std::string(parse(bad).status().message()), Catch::Contains("key 'provenance.graphs' must be an integer"));
  bad = nlohmann::json::parse(m.ToJson());
  bad["provenance"]["finetunes"][0].erase("created");
  CHECK_THAT(std::string(parse(bad).status().message()),
             Catch::Contains("key 'provenance.finetunes' must be objects with parent_version, graphs, measurements"));
}

TEST_CASE("a registry never reads through a symbolic link out of it", "[registry]") {
  TempDir dir;
  const std::string root = dir.path() + "/registry";
  Registry reg(root);
  const int64_t v = *reg.Publish(TestManifest(dir.path()));
  REQUIRE(reg.ReadVersion("layout:xla:random", v).ok());
  // A weight file replaced by a link to a file outside (with the same bytes, so the
  // checksum alone would pass).
  const std::string weights = reg.VersionDir("layout:xla:random", v) + "/fold_0.npz";
  std::filesystem::copy_file(weights, dir.path() + "/outside.npz");
  std::filesystem::remove(weights);
  std::filesystem::create_symlink(dir.path() + "/outside.npz", weights);
  absl::StatusOr<Manifest> read = reg.ReadVersion("layout:xla:random", v);
  CHECK(read.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(read.status().message()), Catch::Contains("fold_0.npz: resolves outside the registry"));
  // A link inside the registry is fine.
  std::filesystem::remove(weights);
  std::filesystem::copy_file(dir.path() + "/outside.npz", root + "/shared.npz");
  std::filesystem::create_symlink(root + "/shared.npz", weights);
  CHECK(reg.ReadVersion("layout:xla:random", v).ok());
  // A version folder that is a link out of the registry.
  std::filesystem::rename(reg.VersionDir("layout:xla:random", v), dir.path() + "/moved");
  std::filesystem::create_symlink(dir.path() + "/moved", reg.VersionDir("layout:xla:random", v));
  CHECK(reg.ReadVersion("layout:xla:random", v).status().code() == absl::StatusCode::kPermissionDenied);
}

TEST_CASE("publishing the same model again is the same version and stale staging is cleaned", "[registry]") {
  TempDir dir;
  Registry reg(dir.path() + "/registry");
  bool existed = true;
  const int64_t v1 = *reg.Publish(TestManifest(dir.path()), &existed);
  CHECK_FALSE(existed);
  // A retried publish Job, or a finished run published twice: no duplicate version.
  CHECK(*reg.Publish(TestManifest(dir.path()), &existed) == v1);
  CHECK(existed);
  CHECK(reg.ListVersions("layout:xla:random") == std::vector<int64_t>{v1});
  // Other weights, or other inference settings, are another model.
  const int64_t v2 = *reg.Publish(TestManifest(dir.path(), "b"), &existed);
  CHECK((v2 == v1 + 1 && !existed));
  Manifest other_reference = TestManifest(dir.path());
  other_reference.reference_configs = 64;
  CHECK(*reg.Publish(other_reference, &existed) == v2 + 1);
  // A retired version is not reused: publishing its model again is a new version.
  REQUIRE(reg.Retire("layout:xla:random", v1, "test").ok());
  CHECK(*reg.Publish(TestManifest(dir.path()), &existed) == v2 + 2);
  CHECK_FALSE(existed);

  // Staging folders: one a killed publish left two hours ago goes, a fresh one stays.
  const std::string coll = dir.path() + "/registry/layout:xla:random";
  std::filesystem::create_directories(coll + "/.staging-1-old");
  std::filesystem::create_directories(coll + "/.staging-2-live");
  std::filesystem::last_write_time(coll + "/.staging-1-old",
                                   std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
  REQUIRE(reg.Publish(TestManifest(dir.path(), "c")).ok());
  CHECK_FALSE(std::filesystem::exists(coll + "/.staging-1-old"));
  CHECK(std::filesystem::exists(coll + "/.staging-2-live"));
}
