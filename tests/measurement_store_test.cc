// The measurement store (model/store/measurement_store.h) on the real unet_3d graph: shards
// that tgraph's loaders read as a dataset, the median of repeated measurements,
// precise refusals, nothing partial left behind, concurrent appends.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <set>
#include <thread>

#include "model/core/graph_io.h"
#include "model/core/file_util.h"
#include "model/store/measurement_store.h"
#include "model/store/report_ids.h"
#include "model/store/stored_layouts.h"
#include "model/core/npy.h"
#include "tests/test_util.h"

using namespace tgraph;
namespace fs = std::filesystem;

namespace {

const LayoutGraph& Unet() {
  static const LayoutGraph* g = [] {
    absl::StatusOr<LayoutGraph> r =
        LoadLayoutGraph(std::string(TGRAPH_REAL_DATA) + "/npz/layout/xla/random/valid/unet_3d.4x4.bf16.npz");
    REQUIRE(r.ok());
    return new LayoutGraph(std::move(*r));
  }();
  return *g;
}

// A report of the given rows of the real file, with the given runtimes.
MeasurementReport Report(const std::vector<int64_t>& rows, const std::vector<int64_t>& runtimes) {
  const LayoutGraph& u = Unet();
  MeasurementReport r;
  r.collection = *ParseCollection("layout:xla:default");
  r.graph_hash = "00ab12cd34ef5678";
  r.graph = u.graph;
  r.node_config_ids = u.node_config_ids;
  const size_t row = static_cast<size_t>(u.num_config_nodes()) * kConfigFeatDim;
  for (int64_t c : rows) r.config_feat.insert(r.config_feat.end(), u.config(c), u.config(c) + row);
  r.num_configs = static_cast<int64_t>(rows.size());
  r.runtime_ns = runtimes;
  r.source = "farm-a/pool-3";
  return r;
}

int CountFiles(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

}  // namespace

TEST_CASE("measurement shards are TpuGraphs files, and repeats train on their median", "[measurements]") {
  TempDir dir;
  MeasurementStore store(dir.path());
  absl::StatusOr<AppendResult> a = store.Append(Report({0, 1}, {100, 200}));
  REQUIRE(a.ok());
  CHECK(a->measurements == 2);
  CHECK(a->bytes > 0);
  absl::StatusOr<AppendResult> b = store.Append(Report({0, 0, 2}, {300, 110, 50}));
  REQUIRE(b.ok());
  CHECK(a->path != b->path);
  const std::string train = dir.path() + "/npz/layout/xla/default/train";
  CHECK(fs::path(a->path).parent_path() == fs::path(train));

  // Each shard is a layout file the project's loaders read, with the reporter's label.
  absl::StatusOr<LayoutGraph> shard = LoadLayoutGraph(b->path);
  REQUIRE(shard.ok());
  CHECK(shard->num_configs == 3);
  CHECK(shard->config_runtime == std::vector<int64_t>{300, 110, 50});
  CHECK(shard->graph.node_feat == Unet().graph.node_feat);
  absl::StatusOr<std::string> bytes = ReadFile(b->path);
  REQUIRE(bytes.ok());
  absl::StatusOr<NpzArchive> npz = ReadNpzFromBuffer(*bytes, b->path);
  REQUIRE(npz.ok());
  REQUIRE(npz->count("tgraph_source") == 1);
  const NpyArray& src = npz->at("tgraph_source");
  CHECK(std::string(src.bytes.begin(), src.bytes.end()) == "farm-a/pool-3");
  // Its rows are int8 (a quarter of the dataset's float32), read by the same loader.
  CHECK(npz->at("node_config_feat").dtype == DType::kInt8);
  CHECK(npz->at("node_config_feat").shape == std::vector<int64_t>{3, Unet().num_config_nodes(), kConfigFeatDim});

  // Merged: rows 0, 1, 2 of the real file; row 0 measured 100, 300 and 110 -> 110.
  absl::StatusOr<LoadedMeasurements> m = LoadMeasurements(dir.path(), *ParseCollection("layout:xla:default"));
  REQUIRE(m.ok());
  REQUIRE(m->graphs.size() == 1);
  const LayoutGraph& g = m->graphs.front();
  CHECK(g.name == "00ab12cd34ef5678");
  REQUIRE(g.num_configs == 3);
  CHECK(g.config_runtime == std::vector<int64_t>{110, 200, 50});
  const size_t row = static_cast<size_t>(g.num_config_nodes()) * kConfigFeatDim;
  for (int64_t c = 0; c < 3; ++c)
    CHECK(std::equal(g.config(c), g.config(c) + row, Unet().config(c)));
  CHECK(ValidateLayoutGraph(g, "merged").ok());

  // A shard written before shards were int8 (float32 rows) merges with the others.
  LayoutGraph older = *shard;
  older.num_configs = 1;
  older.config_feat.assign(Unet().config(3), Unet().config(3) + row);
  older.config_runtime = {70};
  REQUIRE(SaveLayoutGraph(train + "/00ab12cd34ef5678.m5.0000abcd.npz", older).ok());
  absl::StatusOr<NpzArchive> older_npz = ReadNpzFromBuffer(*ReadFile(train + "/00ab12cd34ef5678.m5.0000abcd.npz"), "older");
  REQUIRE(older_npz.ok());
  CHECK(older_npz->at("node_config_feat").dtype == DType::kFloat32);
  absl::StatusOr<LoadedMeasurements> with_older = LoadMeasurements(dir.path(), *ParseCollection("layout:xla:default"));
  REQUIRE(with_older.ok());
  REQUIRE(with_older->graphs.front().num_configs == 4);
  CHECK(with_older->graphs.front().config_runtime.back() == 70);
  fs::remove(train + "/00ab12cd34ef5678.m5.0000abcd.npz");

  // Another collection has nothing yet; a stale temporary is skipped.
  std::FILE* f = std::fopen((train + "/00ab12cd34ef5678.m1.npz.partial").c_str(), "w");
  std::fputs("half a shard", f);
  std::fclose(f);
  absl::StatusOr<LoadedMeasurements> again = LoadMeasurements(dir.path(), *ParseCollection("layout:xla:default"));
  REQUIRE(again.ok());
  CHECK(again->graphs.front().num_configs == 3);
  CHECK(again->skipped.empty());  // a temporary is not a shard
  absl::StatusOr<LoadedMeasurements> none = LoadMeasurements(dir.path(), *ParseCollection("layout:nlp:random"));
  REQUIRE(none.ok());
  CHECK(none->graphs.empty());
}

TEST_CASE("bad reports are refused with the field and row, and nothing is written", "[measurements]") {
  TempDir dir;
  MeasurementStore store(dir.path());
  auto refused = [&](const MeasurementReport& r, absl::StatusCode code, const std::string& needle) {
    absl::StatusOr<AppendResult> s = store.Append(r);
    REQUIRE_FALSE(s.ok());
    INFO(s.status().message());
    CHECK(s.status().code() == code);
    CHECK(std::string(s.status().message()).find(needle) != std::string::npos);
  };
  refused(Report({0, 1, 2}, {100, 0, 5}), absl::StatusCode::kInvalidArgument, "runtimes_ns[1]: 0");
  refused(Report({0, 1}, {100, -7}), absl::StatusCode::kInvalidArgument, "runtimes_ns[1]: -7");
  refused(Report({0, 1}, {100}), absl::StatusCode::kInvalidArgument, "1 runtimes for 2 configuration rows");
  // A count whose product with the row size overflows int64 (2^62 x nc x 18): refused by
  // the runtimes it does not have, before anything is multiplied (the review's case).
  MeasurementReport long_source = Report({0}, {1});
  long_source.source = std::string(kMaxSourceBytes + 1, 'x');  // the review stored 20 MiB labels in every shard
  refused(long_source, absl::StatusCode::kInvalidArgument, "source: 257 bytes; a label of at most 256 bytes");
  MeasurementReport huge = Report({0, 1}, {1, 2});
  huge.num_configs = int64_t{1} << 62;
  refused(huge, absl::StatusCode::kInvalidArgument, "runtimes_ns: 2 runtimes for 4611686018427387904 configuration rows");
  MeasurementReport bad_value = Report({0, 1}, {1, 2});
  bad_value.config_feat[Unet().num_config_nodes() * kConfigFeatDim + 4] = 9;
  refused(bad_value, absl::StatusCode::kInvalidArgument, "layout_configs: config 1, configurable node 0, slot 4 is 9");
  MeasurementReport escape = Report({0}, {1});
  escape.graph_hash = "../../etc";
  refused(escape, absl::StatusCode::kInvalidArgument, "graph_hash");
  MeasurementReport tile = Report({0}, {1});
  tile.collection = *ParseCollection("tile:xla");
  refused(tile, absl::StatusCode::kInvalidArgument, "kernel.name");
  CHECK(CountFiles(dir.path()) == 0);
}

TEST_CASE("a read-only store is an error to the caller, with no shard left behind", "[measurements]") {
  if (::geteuid() == 0) {
    WARN("running as root: permissions do not apply; skipped");
    return;
  }
  TempDir dir;
  MeasurementStore store(dir.path());
  REQUIRE(store.Append(Report({0}, {100})).ok());
  const std::string train = dir.path() + "/npz/layout/xla/default/train";
  REQUIRE(::chmod(train.c_str(), 0555) == 0);
  absl::StatusOr<AppendResult> s = store.Append(Report({1}, {200}));
  ::chmod(train.c_str(), 0755);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(std::string(s.status().message()).find(train) != std::string::npos);
  CHECK(CountFiles(train) == 1);  // the first shard only
}

TEST_CASE("a full disk is RESOURCE_EXHAUSTED to the caller, with no shard left behind", "[measurements]") {
  // A file-size limit fails the shard's write as a full disk does (EFBIG rather than
  // ENOSPC), for root too.
  TempDir dir;
  MeasurementStore store(dir.path());
  REQUIRE(store.Append(Report({0}, {100})).ok());
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 16 * 1024;  // the unet graph alone compresses to far more
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  absl::StatusOr<AppendResult> s = store.Append(Report({1}, {200}));
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  REQUIRE_FALSE(s.ok());
  INFO(s.status().message());
  CHECK(s.status().code() == absl::StatusCode::kResourceExhausted);
  const std::string train = dir.path() + "/npz/layout/xla/default/train";
  CHECK(CountFiles(train) == 1);  // the first shard only: no partial, no temporary
  absl::StatusOr<LoadedMeasurements> m = LoadMeasurements(dir.path(), *ParseCollection("layout:xla:default"));
  REQUIRE(m.ok());
  CHECK(m->graphs.front().config_runtime == std::vector<int64_t>{100});
}

TEST_CASE("concurrent appends get distinct shards and lose none, from two stores on one directory",
          "[measurements]") {
  // Two instances stand for two server replicas writing one shared volume.
  TempDir dir;
  MeasurementStore replica_a(dir.path()), replica_b(dir.path());
  constexpr int kThreads = 4, kEach = 5;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      MeasurementStore& store = t % 2 ? replica_b : replica_a;
      for (int i = 0; i < kEach; ++i)
        if (!store.Append(Report({t * kEach + i}, {1000 + t * kEach + i})).ok()) ++failures;
    });
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(CountFiles(dir.path() + "/npz/layout/xla/default/train") == kThreads * kEach);
  absl::StatusOr<LoadedMeasurements> m = LoadMeasurements(dir.path(), *ParseCollection("layout:xla:default"));
  REQUIRE(m.ok());
  REQUIRE(m->graphs.size() == 1);
  // The merged graph has one row per distinct configuration among the file's rows 0..19.
  std::set<std::vector<int8_t>> distinct;
  const size_t row = static_cast<size_t>(Unet().num_config_nodes()) * kConfigFeatDim;
  for (int64_t c = 0; c < kThreads * kEach; ++c) distinct.emplace(Unet().config(c), Unet().config(c) + row);
  CHECK(m->graphs.front().num_configs == static_cast<int64_t>(distinct.size()));
}

TEST_CASE("bad shards are left out and listed, and the good ones still train", "[measurements]") {
  TempDir dir;
  MeasurementStore store(dir.path());
  REQUIRE(store.Append(Report({0}, {100})).ok());
  // A shard of the same hash whose graph differs: left out, naming both files.
  MeasurementReport other = Report({1}, {200});
  other.graph.node_feat[0] += 1.0f;
  absl::StatusOr<AppendResult> second = store.Append(other);
  REQUIRE(second.ok());
  // A corrupt shard (named as the store names them) of the same hash, and one of another
  // graph: left out, each named; the good shard's rows remain.
  const std::string train = dir.path() + "/npz/layout/xla/default/train";
  for (const std::string name : {"00ab12cd34ef5678.m999.deadbeef.npz", "11ab12cd34ef5678.m1.deadbeef.npz"}) {
    std::FILE* f = std::fopen((train + "/" + name).c_str(), "w");
    std::fputs("PK\x03\x04 not a zip at all", f);
    std::fclose(f);
  }
  absl::StatusOr<LoadedMeasurements> m = LoadMeasurements(dir.path(), *ParseCollection("layout:xla:default"));
  REQUIRE(m.ok());
  REQUIRE(m->graphs.size() == 1);
  CHECK(m->graphs.front().config_runtime == std::vector<int64_t>{100});
  REQUIRE(m->skipped.size() == 3);
  std::string all;
  for (const std::string& s : m->skipped) all += s + "\n";
  INFO(all);
  CHECK(all.find(second->path + ": its graph differs from") != std::string::npos);
  CHECK(all.find("00ab12cd34ef5678.m999.deadbeef.npz: ") != std::string::npos);
  CHECK(all.find("11ab12cd34ef5678.m1.deadbeef.npz: ") != std::string::npos);
}

TEST_CASE("a crashed writer's temporaries are removed at once, a live writer's kept, and an unknown one's once an "
          "hour old",
          "[measurements]") {
  TempDir dir;
  // A live writer (another replica): its lock held, its shard's name has its token.
  MeasurementStore live(dir.path());
  REQUIRE(live.HoldWriterLock().ok());
  absl::StatusOr<AppendResult> shard = live.Append(Report({0}, {100}));
  REQUIRE(shard.ok());
  const std::string name = fs::path(shard->path).filename().string();
  const std::string live_token = name.substr(name.size() - 12, 8);
  // A crashed writer: its lock file left behind, held by no process (the kernel dropped it).
  const std::string writers = dir.path() + "/writers";
  std::ofstream(writers + "/dead0123.lock") << "";
  const std::string train = dir.path() + "/npz/layout/xla/default/train";
  const std::string crashed = train + "/00ab12cd34ef5678.m3.dead0123.npz.partial";  // fresh, yet removed
  const std::string crashed_tmp = train + "/00ab12cd34ef5678.m4.dead0123.npz.partial.tmp.77";
  const std::string in_flight = train + "/00ab12cd34ef5678.m5." + live_token + ".npz.partial";
  const std::string unknown_stale = train + "/00ab12cd34ef5678.m1.abcd0123.npz.partial.tmp.77";
  const std::string unknown_fresh = train + "/00ab12cd34ef5678.m2.abcd0123.npz.partial";
  for (const std::string& p : {crashed, crashed_tmp, in_flight, unknown_stale, unknown_fresh})
    std::ofstream(p) << "half a shard";
  fs::last_write_time(unknown_stale, fs::file_time_type::clock::now() - std::chrono::hours(2));

  MeasurementStore starting(dir.path());
  REQUIRE(starting.HoldWriterLock().ok());
  absl::StatusOr<MeasurementStore::TemporarySweep> sweep = starting.RemoveStaleTemporaries(3600);
  REQUIRE(sweep.ok());
  CHECK(sweep->removed == 3);
  CHECK(sweep->kept_live == 1);
  CHECK(sweep->kept_unknown == 1);
  CHECK_FALSE(fs::exists(crashed));
  CHECK_FALSE(fs::exists(crashed_tmp));
  CHECK_FALSE(fs::exists(unknown_stale));
  CHECK(fs::exists(in_flight));
  CHECK(fs::exists(unknown_fresh));
  CHECK(fs::exists(shard->path));
  CHECK_FALSE(fs::exists(writers + "/dead0123.lock"));  // the dead writer is forgotten
  CHECK(fs::exists(writers + "/" + live_token + ".lock"));
  absl::StatusOr<MeasurementStore::TemporarySweep> none =
      MeasurementStore(dir.path() + "/nothing-here").RemoveStaleTemporaries();
  REQUIRE(none.ok());
  CHECK(none->removed + none->kept_live + none->kept_unknown == 0);
}

TEST_CASE("a writer's lock file goes with it, and two live writers never share a token", "[measurements]") {
  TempDir dir;
  const std::string writers = dir.path() + "/writers";
  {
    MeasurementStore a(dir.path()), b(dir.path());
    REQUIRE(a.HoldWriterLock().ok());
    REQUIRE(b.HoldWriterLock().ok());
    REQUIRE(a.HoldWriterLock().ok());  // idempotent
    int locks = 0;
    for (const auto& e : fs::directory_iterator(writers)) locks += e.path().extension() == ".lock";
    CHECK(locks == 2);
    const std::string pa = a.Append(Report({0}, {100}))->path, pb = b.Append(Report({0}, {100}))->path;
    CHECK(pa.substr(pa.size() - 12, 8) != pb.substr(pb.size() - 12, 8));
  }
  CHECK(fs::is_empty(writers));
}

TEST_CASE("a report retried with its id is stored once: by the same store, a restarted one, or two at once",
          "[measurements]") {
  TempDir dir;
  const std::string train = dir.path() + "/npz/layout/xla/default/train";
  MeasurementReport r = Report({0, 1}, {100, 200});
  r.report_id = "3f2a9c1e-0b7d-4e55-9a0c-2f1d8e6b7a10";
  MeasurementStore store(dir.path());
  absl::StatusOr<AppendResult> first = store.Append(r);
  REQUIRE(first.ok());
  CHECK_FALSE(first->already_stored);
  absl::StatusOr<AppendResult> again = store.Append(r);
  REQUIRE(again.ok());
  CHECK(again->already_stored);
  CHECK(again->path == first->path);
  CHECK(again->measurements == 2);
  CHECK(MeasurementStore(dir.path()).Append(r)->path == first->path);  // a restarted server
  CHECK(CountFiles(train) == 1);
  // Another id: another shard; no id: every call stores.
  r.report_id = "other";
  CHECK_FALSE(store.Append(r)->already_stored);
  r.report_id.clear();
  CHECK_FALSE(store.Append(r)->already_stored);
  CHECK_FALSE(store.Append(r)->already_stored);
  CHECK(CountFiles(train) == 4);

  // Claimed, then the writer died before its shard's rename: the retry writes the claimed
  // name. Eight threads retrying one id at once leave one shard.
  r.report_id = "crashed";
  REQUIRE(ClaimReportShard(dir.path(), r.report_id, train + "/00ab12cd34ef5678.m0000000000000000007.dead0123.npz")
              .ok());
  absl::StatusOr<AppendResult> after_crash = store.Append(r);
  REQUIRE(after_crash.ok());
  CHECK_FALSE(after_crash->already_stored);
  CHECK(fs::path(after_crash->path).filename() == "00ab12cd34ef5678.m0000000000000000007.dead0123.npz");
  CHECK(LoadLayoutGraph(after_crash->path)->config_runtime == std::vector<int64_t>{100, 200});
  r.report_id = "at-once";
  std::vector<std::thread> threads;
  std::atomic<int> written{0}, failed{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      absl::StatusOr<AppendResult> a = store.Append(r);
      if (!a.ok()) ++failed;
      else if (!a->already_stored) ++written;
    });
  for (std::thread& t : threads) t.join();
  CHECK(failed == 0);
  CHECK(written >= 1);
  CHECK(CountFiles(train) == 6);

  // Ids that are not names, and a damaged marker, are errors naming them.
  r.report_id = "../escape";
  CHECK(store.Append(r).status().code() == absl::StatusCode::kInvalidArgument);
  std::ofstream(dir.path() + "/reports/damaged") << "../../etc/passwd\n";
  r.report_id = "damaged";
  absl::StatusOr<AppendResult> damaged = store.Append(r);
  CHECK(damaged.status().code() == absl::StatusCode::kInternal);
  CHECK_THAT(std::string(damaged.status().message()), Catch::Contains("reports/damaged: names '../../etc/passwd'"));
  // Markers older than a day go when a store opens; a day's are kept.
  fs::last_write_time(dir.path() + "/reports/other", fs::file_time_type::clock::now() - std::chrono::hours(25));
  absl::StatusOr<int> removed = RemoveOldReportIds(dir.path());
  REQUIRE(removed.ok());
  CHECK(*removed == 1);
  CHECK_FALSE(fs::exists(dir.path() + "/reports/other"));
  CHECK(fs::exists(dir.path() + "/reports/crashed"));
}

TEST_CASE("a search reads one graph's stored rows in the order first reported, each at its median, newest shards only",
          "[measurements]") {
  TempDir dir;
  MeasurementStore store(dir.path());
  const Collection xla_default = *ParseCollection("layout:xla:default");
  absl::StatusOr<GraphMeasurements> empty = LoadGraphMeasurements(dir.path(), xla_default, "00ab12cd34ef5678");
  REQUIRE(empty.ok());
  CHECK(empty->count == 0);
  CHECK(empty->shards == 0);

  REQUIRE(store.Append(Report({2, 0}, {300, 100})).ok());
  REQUIRE(store.Append(Report({0, 1}, {120, 200})).ok());
  REQUIRE(store.Append(Report({0}, {90})).ok());
  MeasurementReport other = Report({3}, {10});
  other.graph_hash = "11ab12cd34ef5678";  // another graph's: never joined to this one
  REQUIRE(store.Append(other).ok());
  absl::StatusOr<GraphMeasurements> m = LoadGraphMeasurements(dir.path(), xla_default, "00ab12cd34ef5678");
  REQUIRE(m.ok());
  CHECK(m->shards == 3);
  CHECK(m->older_shards == 0);
  CHECK(m->skipped.empty());
  CHECK(m->num_config_nodes == Unet().num_config_nodes());
  // Rows 2, 0, 1 of the real file, first reported in that order; row 0 measured 100, 120
  // and 90: its median 100.
  REQUIRE(m->count == 3);
  CHECK(m->runtime_ns == std::vector<int64_t>{300, 100, 200});
  const size_t row = static_cast<size_t>(Unet().num_config_nodes()) * kConfigFeatDim;
  for (const auto& [i, c] : {std::pair{0, 2}, {1, 0}, {2, 1}})
    CHECK(std::equal(m->rows.begin() + i * row, m->rows.begin() + (i + 1) * row, Unet().config(c)));
  // Fewer rows asked for: those reported most recently, with all their runs. The bound a
  // search asks for keeps a graph's joined rows within 16 MiB: 4,096 rows of 62 nodes,
  // 932 of 1,000.
  absl::StatusOr<GraphMeasurements> last = LoadGraphMeasurements(dir.path(), xla_default, "00ab12cd34ef5678", 1);
  REQUIRE(last.ok());
  REQUIRE(last->count == 1);
  CHECK(last->runtime_ns == std::vector<int64_t>{100});
  CHECK(std::equal(last->rows.begin(), last->rows.end(), Unet().config(0)));
  CHECK(JoinedRowLimit(62) == kMaxJoinedRows);
  CHECK(JoinedRowLimit(1000) == (int64_t{16} << 20) / (1000 * kConfigFeatDim));
  CHECK(JoinedRowLimit(1000) == 932);
  // Another collection's directory holds nothing of it.
  absl::StatusOr<GraphMeasurements> nlp = LoadGraphMeasurements(dir.path(), *ParseCollection("layout:nlp:random"),
                                                                "00ab12cd34ef5678");
  REQUIRE(nlp.ok());
  CHECK(nlp->count == 0);

  // Past kMaxJoinedShards reports only the newest are read: rows 2 and 1, reported only
  // in the two oldest, are gone; row 0 keeps the newer runtimes (90, then 50 63 times).
  for (int64_t i = 0; i < kMaxJoinedShards - 1; ++i) REQUIRE(store.Append(Report({0}, {50})).ok());
  absl::StatusOr<GraphMeasurements> newest = LoadGraphMeasurements(dir.path(), xla_default, "00ab12cd34ef5678");
  REQUIRE(newest.ok());
  CHECK(newest->shards == kMaxJoinedShards);
  CHECK(newest->older_shards == 2);
  REQUIRE(newest->count == 1);
  CHECK(newest->runtime_ns == std::vector<int64_t>{50});
  CHECK(std::equal(newest->rows.begin(), newest->rows.end(), Unet().config(0)));
  // Hundreds of older reports are counted, never read (these would not load).
  const std::string train = dir.path() + "/npz/layout/xla/default/train";
  for (int i = 1; i <= 300; ++i) {
    char name[96];
    std::snprintf(name, sizeof(name), "/00ab12cd34ef5678.m%019d.0000abcd.npz", i);
    std::ofstream(train + name) << "an old report";
  }
  absl::StatusOr<GraphMeasurements> many = LoadGraphMeasurements(dir.path(), xla_default, "00ab12cd34ef5678");
  REQUIRE(many.ok());
  CHECK(many->older_shards == 302);
  CHECK(many->shards == kMaxJoinedShards);
  CHECK(many->skipped.empty());
  CHECK(many->runtime_ns == std::vector<int64_t>{50});

  // A corrupt shard among the newest is left out and named; the others still join.
  const std::string bad = train + "/00ab12cd34ef5678.m9999999999999999999.deadbeef.npz";
  std::FILE* f = std::fopen(bad.c_str(), "w");
  std::fputs("PK\x03\x04 not a zip at all", f);
  std::fclose(f);
  absl::StatusOr<GraphMeasurements> with_bad = LoadGraphMeasurements(dir.path(), xla_default, "00ab12cd34ef5678");
  REQUIRE(with_bad.ok());
  REQUIRE(with_bad->skipped.size() == 1);
  CHECK(with_bad->skipped[0].rfind(bad + ": ", 0) == 0);
  CHECK(with_bad->shards == kMaxJoinedShards - 1);
  CHECK(with_bad->count == 1);
  fs::remove(bad);

  // A report whose rows alone would pass 16 MiB (15,100 rows of 62 nodes) is not read for
  // a search, said before reading it; the rest still join. A cancelled search stops.
  std::vector<int64_t> bulk(15100, 3), bulk_ns(15100, 70);
  REQUIRE(store.Append(Report(bulk, bulk_ns)).ok());
  absl::StatusOr<GraphMeasurements> with_bulk = LoadGraphMeasurements(dir.path(), xla_default, "00ab12cd34ef5678");
  REQUIRE(with_bulk.ok());
  REQUIRE(with_bulk->skipped.size() == 1);
  CHECK_THAT(with_bulk->skipped[0], Catch::Contains(": its rows take 16 MiB, over the 16 MiB a search reads of one "
                                                    "report"));
  CHECK(with_bulk->count == 1);
  absl::StatusOr<GraphMeasurements> stopped =
      LoadGraphMeasurements(dir.path(), xla_default, "00ab12cd34ef5678", kMaxJoinedRows, [] { return true; });
  REQUIRE_FALSE(stopped.ok());
  CHECK(stopped.status().code() == absl::StatusCode::kCancelled);
}
