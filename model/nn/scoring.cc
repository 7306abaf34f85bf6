#include "model/nn/scoring.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "model/core/config_rows.h"
#include "model/core/rng.h"

namespace tgraph {

ConfigBatch GatherConfigs(const ConfigRows& rows, const std::vector<int64_t>& idx, size_t begin, size_t end) {
  const int64_t n = static_cast<int64_t>(end - begin);
  ConfigBatch b;
  if (rows.layout) {
    const int64_t row = rows.num_config_nodes * kConfigFeatDim;
    b.layout = torch::empty({n, rows.num_config_nodes, kConfigFeatDim}, torch::kInt64);
    int64_t* p = b.layout.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      const int8_t* src = rows.layout + idx[begin + i] * row;
      LayoutValueIndices(src, row, p + i * row);
    }
  } else {
    b.tile = torch::empty({n, kTileConfigDim}, torch::kFloat32);
    float* p = b.tile.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(rows.tile + idx[begin + i] * kTileConfigDim, kTileConfigDim, p + i * kTileConfigDim);
  }
  return b;
}

int64_t FixedReferenceGroups(int64_t rows, int64_t reference_configs, int64_t reference_groups) {
  return std::max<int64_t>(1, reference_groups * rows / std::max<int64_t>(1, reference_configs));
}

int64_t CountNonFinite(const std::vector<double>& scores) {
  return std::count_if(scores.begin(), scores.end(), [](double v) { return !std::isfinite(v); });
}

void StandardizeInPlace(std::vector<double>& v) {
  if (v.empty()) return;
  const double n = static_cast<double>(v.size());
  double mean = 0;
  for (double x : v) mean += x;
  mean /= n;
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / n);
  // All equal (or one configuration): no order to keep, every score 0.
  for (double& x : v) x = sd > 0 ? (x - mean) / sd : x - mean;
}

std::vector<int64_t> BatchBounds(int64_t count, int64_t batch_size) {
  std::vector<int64_t> bounds = {0};
  if (count <= 0) return bounds;
  const int64_t batches = (count + std::max<int64_t>(1, batch_size) - 1) / std::max<int64_t>(1, batch_size);
  const int64_t base = count / batches, larger = count % batches;  // the first `larger` get one more
  for (int64_t b = 0; b < batches; ++b) bounds.push_back(bounds.back() + base + (b < larger ? 1 : 0));
  return bounds;
}

namespace {

// ScoringOptions::batch_softmax: each batch its own softmax, TTA permutations. Scores of
// one fold are averaged over the passes it ran, then standardised over the request.
ScoreResult ScoreBatchSoftmax(const std::vector<FoldModel>& folds, const GraphTensors& graph, const ConfigRows& rows,
                              const ScoringOptions& o) {
  torch::NoGradGuard no_grad;
  const int64_t c = rows.count;
  const int64_t batch = std::max<int64_t>(1, o.batch_size);
  const std::vector<int64_t> bounds = BatchBounds(c, batch);
  // All of a request's configs in one batch: permutations cannot change the scores.
  const int passes = c <= batch ? 1 : std::max(1, o.batch_softmax.tta);
  std::vector<std::vector<int64_t>> orders(passes, std::vector<int64_t>(c));
  Rng rng(o.batch_softmax.seed);
  for (int p = 0; p < passes; ++p) {
    std::iota(orders[p].begin(), orders[p].end(), 0);
    if (passes > 1) rng.Shuffle(orders[p]);
  }
  ScoreResult r;
  r.score.assign(c, 0.0);
  r.spread.assign(c, 0.0);
  std::vector<double> fold_score(c), sum_sq(c, 0.0), previous_mean(c), mean(c);
  for (const FoldModel& f : folds) {
    std::fill(fold_score.begin(), fold_score.end(), 0.0);
    int run = 0;  // passes this fold ran
    StaticEncoding local;
    const StaticEncoding* cache = f.cache;
    if (!cache) {
      local = f.net->Precompute(graph);
      cache = &local;
    }
    for (const std::vector<int64_t>& order : orders) {
      for (size_t b = 0; b + 1 < bounds.size(); ++b) {
        if (o.cancelled && o.cancelled()) {
          r.cancelled = true;
          return r;
        }
        const int64_t begin = bounds[b], end = bounds[b + 1];
        const torch::Tensor s =
            f.net->Score(graph, GatherConfigs(rows, order, static_cast<size_t>(begin), static_cast<size_t>(end)), cache)
                .to(torch::kFloat64)
                .contiguous();
        const double* sp = s.data_ptr<double>();
        for (int64_t i = begin; i < end; ++i) fold_score[order[i]] += sp[i - begin];
        ++r.batches;
        r.evaluated += end - begin;
      }
      ++run;
      ++r.passes;
      if (o.batch_softmax.pass_means) {
        std::vector<double> m(c);
        for (int64_t i = 0; i < c; ++i) m[i] = fold_score[i] / run;
        o.batch_softmax.pass_means->push_back(std::move(m));
      }
      if (o.batch_softmax.tta_agreement <= 0 || run == passes) continue;
      // Stop once another pass no longer changes the ranking (to the agreed tau).
      for (int64_t i = 0; i < c; ++i) mean[i] = fold_score[i] / run;
      if (run >= 2 && KendallTau(mean, previous_mean) >= o.batch_softmax.tta_agreement) break;
      std::swap(mean, previous_mean);
    }
    for (int64_t i = 0; i < c; ++i) fold_score[i] /= run;
    StandardizeInPlace(fold_score);
    for (int64_t i = 0; i < c; ++i) {
      r.score[i] += fold_score[i];
      sum_sq[i] += fold_score[i] * fold_score[i];
    }
  }
  const double k = static_cast<double>(std::max<size_t>(1, folds.size()));
  for (int64_t i = 0; i < c; ++i) {
    r.score[i] /= k;
    r.spread[i] = std::sqrt(std::max(0.0, sum_sq[i] / k - r.score[i] * r.score[i]));
  }
  return r;
}

size_t RowBytes(const ConfigRows& rows) {
  return rows.layout ? static_cast<size_t>(rows.num_config_nodes * kConfigFeatDim)
                     : static_cast<size_t>(kTileConfigDim) * sizeof(float);
}
const unsigned char* RowData(const ConfigRows& rows, int64_t i) {
  return rows.layout ? reinterpret_cast<const unsigned char*>(rows.layout) + i * RowBytes(rows)
                     : reinterpret_cast<const unsigned char*>(rows.tile) + i * RowBytes(rows);
}
bool SameRow(const ConfigRows& a, int64_t i, const ConfigRows& b, int64_t j) {
  return std::memcmp(RowData(a, i), RowData(b, j), RowBytes(a)) == 0;
}

// Rows of `rows` by content: the index of each row's first equal row.
std::vector<int64_t> FirstEqualRows(const ConfigRows& rows, const std::vector<uint64_t>& hash) {
  std::vector<int64_t> first(static_cast<size_t>(rows.count));
  std::unordered_multimap<uint64_t, int64_t> seen;
  seen.reserve(static_cast<size_t>(rows.count));
  for (int64_t i = 0; i < rows.count; ++i) {
    first[i] = i;
    auto [lo, hi] = seen.equal_range(hash[i]);
    for (auto it = lo; it != hi; ++it)
      if (SameRow(rows, it->second, rows, i)) {
        first[i] = it->second;
        break;
      }
    if (first[i] == i) seen.emplace(hash[i], i);
  }
  return first;
}

// The reference's rows, copied (model/nn/scoring.h).
struct ReferenceRows {
  std::vector<int8_t> layout;
  std::vector<float> tile;
  ConfigRows rows;
};

ReferenceRows CopyRows(const ConfigRows& from, const std::vector<int64_t>& idx) {
  ReferenceRows r;
  r.rows = from;
  r.rows.count = static_cast<int64_t>(idx.size());
  const size_t bytes = RowBytes(from);
  if (from.layout) {
    r.layout.resize(idx.size() * bytes);
    for (size_t i = 0; i < idx.size(); ++i) std::memcpy(r.layout.data() + i * bytes, RowData(from, idx[i]), bytes);
    r.rows.layout = r.layout.data();
  } else {
    r.tile.resize(idx.size() * kTileConfigDim);
    for (size_t i = 0; i < idx.size(); ++i)
      std::memcpy(r.tile.data() + i * kTileConfigDim, RowData(from, idx[i]), bytes);
    r.rows.tile = r.tile.data();
  }
  return r;
}

std::vector<double> ToDoubles(const torch::Tensor& t) {
  const torch::Tensor d = t.to(torch::kFloat64).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

// One fold's reference and how the request's rows meet it.
struct ReferencePlan {
  ReferenceRows ref;
  std::vector<int64_t> member;   // per row: its index in the reference, or -1
  std::vector<int64_t> queries;  // distinct rows that are not members, by (hash, bytes)
};

// The reference: `given` when set, else chosen from `choose_from` with `salt` (the rows
// themselves when null); every distinct row (first[i] == i) is a member of it or a query.
ReferencePlan PlanReference(const ConfigRows& rows, const std::vector<uint64_t>& hash, const std::vector<int64_t>& first,
                            const ConfigRows* given, const ConfigRows* choose_from, int64_t size, uint64_t salt) {
  ReferencePlan p;
  const int64_t c = rows.count;
  p.member.assign(static_cast<size_t>(c), -1);
  ReferenceRows chosen_elsewhere;
  if (!given && choose_from) {
    chosen_elsewhere = CopyRows(*choose_from, ChooseReference(*choose_from, size, salt));
    given = &chosen_elsewhere.rows;
  }
  if (given) {
    p.ref = CopyRows(*given, ChooseReference(*given, given->count));
    std::unordered_multimap<uint64_t, int64_t> by_hash;
    for (int64_t j = 0; j < p.ref.rows.count; ++j) by_hash.emplace(RowHash(p.ref.rows, j), j);
    for (int64_t i = 0; i < c; ++i) {
      if (first[i] != i) continue;
      auto [lo, hi] = by_hash.equal_range(hash[i]);
      for (auto it = lo; it != hi; ++it)
        if (SameRow(rows, i, p.ref.rows, it->second)) p.member[i] = it->second;
    }
  } else {
    // In the order of the unsalted hashes, as a given reference is: the same rows make
    // the same batch whichever way they were chosen.
    std::vector<int64_t> chosen = ChooseReference(rows, size, salt);
    std::sort(chosen.begin(), chosen.end(), [&](int64_t a, int64_t b) {
      if (hash[a] != hash[b]) return hash[a] < hash[b];
      return std::memcmp(RowData(rows, a), RowData(rows, b), RowBytes(rows)) < 0;
    });
    p.ref = CopyRows(rows, chosen);
    for (size_t j = 0; j < chosen.size(); ++j) p.member[chosen[j]] = static_cast<int64_t>(j);
  }
  for (int64_t i = 0; i < c; ++i)
    if (first[i] == i && p.member[i] < 0) p.queries.push_back(i);
  // In the order of their hashes, not the request's: the same rows in any order make the
  // same batches, so a permuted request gets the same scores to the last bit.
  std::sort(p.queries.begin(), p.queries.end(), [&](int64_t a, int64_t b) {
    if (hash[a] != hash[b]) return hash[a] < hash[b];
    return std::memcmp(RowData(rows, a), RowData(rows, b), RowBytes(rows)) < 0;
  });
  return p;
}

// One fold against its reference plan: the reference recorded (its members' scores in
// *ref_score), then the queries against it (their scores in *fold_score, by row). False
// when cancelled between batches.
bool ScoreFoldAgainst(const FoldModel& f, const GraphTensors& graph, const ConfigRows& rows, const ReferencePlan& plan,
                      const ScoringOptions& o, std::vector<double>* ref_score, std::vector<double>* fold_score,
                      ScoreResult* r) {
  const RecordedReference rec = RecordReference(f, graph, plan.ref.rows, o);
  *ref_score = rec.scores;
  ++r->batches;
  r->evaluated += rec.count;
  int64_t batches = 0;
  const std::vector<double> s = ScoreAgainstRecorded(f, graph, rows, plan.queries, rec, o, &batches, /*raw=*/true);
  r->batches += batches;
  if (s.size() != plan.queries.size()) return false;
  r->evaluated += static_cast<int64_t>(plan.queries.size());
  for (size_t q = 0; q < plan.queries.size(); ++q) (*fold_score)[plan.queries[q]] = s[q];
  return true;
}

// The reference path of ScoreConfigs (model/nn/scoring.h).
ScoreResult ScoreAgainstReference(const std::vector<FoldModel>& folds, const GraphTensors& graph,
                                  const ConfigRows& rows, const ScoringOptions& o) {
  torch::NoGradGuard no_grad;
  const int64_t c = rows.count;
  ScoreResult r;
  if (c == 0) return r;
  std::vector<uint64_t> hash(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i) hash[i] = RowHash(rows, i);
  const std::vector<int64_t> first = FirstEqualRows(rows, hash);
  const ConfigRows* given = o.reference && o.reference->count > 0 ? o.reference : nullptr;
  const int64_t size = o.max_reference > 0 ? std::min(o.reference_size, o.max_reference) : o.reference_size;

  r.score.assign(c, 0.0);
  r.spread.assign(c, 0.0);
  std::vector<double> fold_score(c), sum_sq(c, 0.0), ref_score;
  std::optional<ReferencePlan> shared;
  for (size_t k = 0; k < folds.size(); ++k) {
    const FoldModel& f = folds[k];
    if (o.cancelled && o.cancelled()) {
      r.cancelled = true;
      return r;
    }
    std::optional<ReferencePlan> own;
    const bool per_fold = o.reference_per_fold && !given;
    const uint64_t salt = static_cast<uint64_t>(f.index >= 0 ? f.index : static_cast<int>(k));
    if (per_fold) own = PlanReference(rows, hash, first, given, o.choose_from, size, salt);
    else if (!shared) shared = PlanReference(rows, hash, first, given, o.choose_from, size, 0);
    const ReferencePlan& plan = per_fold ? *own : *shared;
    const int64_t r_count = plan.ref.rows.count;
    r.reference = r_count;
    if (!ScoreFoldAgainst(f, graph, rows, plan, o, &ref_score, &fold_score, &r)) {
      r.cancelled = true;
      return r;
    }
    ++r.passes;
    // On the common scale: the mean and std of the reference's scores.
    double mean = 0, var = 0;
    for (double x : ref_score) mean += x;
    mean /= static_cast<double>(std::max<int64_t>(1, r_count));
    for (double x : ref_score) var += (x - mean) * (x - mean);
    const double sd = std::sqrt(var / static_cast<double>(std::max<int64_t>(1, r_count)));
    for (int64_t i = 0; i < c; ++i) {
      const int64_t m = plan.member[first[i]];
      const double raw = m >= 0 ? ref_score[m] : fold_score[first[i]];
      const double z = sd > 0 ? (raw - mean) / sd : raw - mean;
      r.score[i] += z;
      sum_sq[i] += z * z;
    }
  }
  const double k = static_cast<double>(std::max<size_t>(1, folds.size()));
  for (int64_t i = 0; i < c; ++i) {
    r.score[i] /= k;
    r.spread[i] = std::sqrt(std::max(0.0, sum_sq[i] / k - r.score[i] * r.score[i]));
  }
  return r;
}

}  // namespace

uint64_t RowHash(const ConfigRows& rows, int64_t i, uint64_t salt) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int k = 0; salt != 0 && k < 8; ++k) h = (h ^ ((salt >> (8 * k)) & 0xff)) * 0x100000001b3ULL;
  const unsigned char* p = RowData(rows, i);
  for (size_t k = 0; k < RowBytes(rows); ++k) h = (h ^ p[k]) * 0x100000001b3ULL;
  return h;
}

std::vector<int64_t> ChooseReference(const ConfigRows& rows, int64_t size, uint64_t salt) {
  std::vector<uint64_t> hash(static_cast<size_t>(rows.count));
  for (int64_t i = 0; i < rows.count; ++i) hash[i] = RowHash(rows, i);
  const std::vector<int64_t> first = FirstEqualRows(rows, hash);
  if (salt != 0)
    for (int64_t i = 0; i < rows.count; ++i) hash[i] = RowHash(rows, i, salt);
  std::vector<int64_t> distinct;
  for (int64_t i = 0; i < rows.count; ++i)
    if (first[i] == i) distinct.push_back(i);
  const auto before = [&](int64_t a, int64_t b) {
    if (hash[a] != hash[b]) return hash[a] < hash[b];
    return std::memcmp(RowData(rows, a), RowData(rows, b), RowBytes(rows)) < 0;
  };
  const size_t keep = static_cast<size_t>(std::clamp<int64_t>(size, 0, static_cast<int64_t>(distinct.size())));
  std::partial_sort(distinct.begin(), distinct.begin() + static_cast<std::ptrdiff_t>(keep), distinct.end(), before);
  distinct.resize(keep);
  return distinct;
}

RecordedReference RecordReference(const FoldModel& f, const GraphTensors& graph, const ConfigRows& reference,
                                  const ScoringOptions& o) {
  torch::NoGradGuard no_grad;
  RecordedReference rec;
  rec.fold = f;
  if (!rec.fold.cache) {
    rec.own_cache = std::make_shared<StaticEncoding>(f.net->Precompute(graph));
    rec.fold.cache = rec.own_cache.get();
  }
  rec.count = reference.count;
  std::vector<int64_t> order(static_cast<size_t>(rec.count));
  std::iota(order.begin(), order.end(), 0);
  ScoreMode record;
  record.groups = o.reference_groups;
  if (f.net->UsesReference()) record.record = &rec.stats;
  rec.scores = ToDoubles(f.net->Score(graph, GatherConfigs(reference, order, 0, order.size()), rec.fold.cache, record));
  // The common scale: the mean and std of the reference's scores.
  for (double x : rec.scores) rec.mean += x;
  rec.mean /= static_cast<double>(std::max<int64_t>(1, rec.count));
  double var = 0;
  for (double x : rec.scores) var += (x - rec.mean) * (x - rec.mean);
  rec.sd = std::sqrt(var / static_cast<double>(std::max<int64_t>(1, rec.count)));
  return rec;
}

std::vector<double> ScoreAgainstRecorded(const FoldModel& f, const GraphTensors& graph, const ConfigRows& rows,
                                         const std::vector<int64_t>& idx, const RecordedReference& rec,
                                         const ScoringOptions& o, int64_t* batches, bool raw) {
  torch::NoGradGuard no_grad;
  ScoreMode use;
  if (f.net->UsesReference()) use.use = &rec.stats;
  std::vector<double> out(idx.size());
  const std::vector<int64_t> bounds = BatchBounds(static_cast<int64_t>(idx.size()), std::max<int64_t>(1, o.batch_size));
  for (size_t b = 0; b + 1 < bounds.size(); ++b) {
    if (o.cancelled && o.cancelled()) return {};
    const std::vector<double> s = ToDoubles(f.net->Score(
        graph, GatherConfigs(rows, idx, static_cast<size_t>(bounds[b]), static_cast<size_t>(bounds[b + 1])),
        rec.fold.cache, use));
    for (int64_t i = bounds[b]; i < bounds[b + 1]; ++i) {
      const double v = s[i - bounds[b]];
      out[i] = raw ? v : (rec.sd > 0 ? (v - rec.mean) / rec.sd : v - rec.mean);
    }
    if (batches) ++*batches;
  }
  return out;
}

ScoreResult ScoreConfigs(const std::vector<FoldModel>& folds, const GraphTensors& graph, const ConfigRows& rows,
                         const ScoringOptions& o) {
  ScoreResult r = o.batch_softmax.on ? ScoreBatchSoftmax(folds, graph, rows, o) : ScoreAgainstReference(folds, graph, rows, o);
  // The spread is the folds' disagreement: scaled with their share, and left as it is by a
  // prior common to all of them.
  if (o.tile_prior && rows.tile && !r.cancelled) {
    const TilePriorValues& p = *o.tile_prior;
    for (int64_t i = 0; i < rows.count && i < static_cast<int64_t>(r.score.size()); ++i) {
      r.score[i] *= p.network_share;
      if (i < static_cast<int64_t>(r.spread.size())) r.spread[i] *= p.network_share;
      if (p.weight > 0) r.score[i] += p.weight * p.Of(TritonTileOfRow(rows.tile + i * kTileConfigDim));
    }
  }
  return r;
}

ScoreResult ScoreCascade(const std::vector<FoldModel>& folds, const GraphTensors& graph, const ConfigRows& rows,
                         const ScoringOptions& o, int64_t top_k, double fraction) {
  const int64_t c = rows.count;
  const int64_t keep = std::min<int64_t>(
      c, std::max<int64_t>(static_cast<int64_t>(std::ceil(fraction * static_cast<double>(c))), 2 * top_k));
  if (folds.size() <= 1 || top_k <= 0 || keep >= c) {
    ScoreResult r = ScoreConfigs(folds, graph, rows, o);
    r.rescored = c;
    return r;
  }
  // The same references in both stages: chosen from all the rows. Each fold keeps its
  // index (its reference's salt) in both.
  ScoringOptions with_ref = o;
  if (!o.choose_from) with_ref.choose_from = &rows;
  std::vector<FoldModel> indexed = folds;
  for (size_t k = 0; k < indexed.size(); ++k)
    if (indexed[k].index < 0) indexed[k].index = static_cast<int>(k);
  ScoreResult first = ScoreConfigs({indexed.front()}, graph, rows, with_ref);
  if (first.cancelled) return first;
  const std::vector<int64_t> kept = RankByScore(first.score, keep);
  // The kept rows, gathered in their ranked order.
  std::vector<int8_t> layout;
  std::vector<float> tile;
  ConfigRows subset = rows;
  subset.count = keep;
  if (rows.layout) {
    const int64_t row = rows.num_config_nodes * kConfigFeatDim;
    layout.resize(static_cast<size_t>(keep * row));
    for (int64_t i = 0; i < keep; ++i) std::copy_n(rows.layout + kept[i] * row, row, layout.data() + i * row);
    subset.layout = layout.data();
  } else {
    tile.resize(static_cast<size_t>(keep * kTileConfigDim));
    for (int64_t i = 0; i < keep; ++i)
      std::copy_n(rows.tile + kept[i] * kTileConfigDim, kTileConfigDim, tile.data() + i * kTileConfigDim);
    subset.tile = tile.data();
  }
  // The other folds on the kept rows; the first fold's scores of them are the first
  // stage's (the same reference and function), combined into the mean and spread.
  const ScoreResult rest =
      ScoreConfigs(std::vector<FoldModel>(indexed.begin() + 1, indexed.end()), graph, subset, with_ref);
  ScoreResult full;
  full.score.resize(keep);
  full.spread.resize(keep);
  full.batches = rest.batches;
  full.evaluated = rest.evaluated;
  full.passes = rest.passes;
  full.cancelled = rest.cancelled;
  full.reference = rest.reference;
  const double others = static_cast<double>(indexed.size() - 1), k = static_cast<double>(indexed.size());
  for (int64_t i = 0; i < keep; ++i) {
    const double z0 = first.score[kept[i]], m = rest.score[i], sd = rest.spread[i];
    const double mean = (z0 + others * m) / k, mean_sq = (z0 * z0 + others * (sd * sd + m * m)) / k;
    full.score[i] = mean;
    full.spread[i] = std::sqrt(std::max(0.0, mean_sq - mean * mean));
  }
  ScoreResult r;
  r.batches = first.batches + full.batches;
  r.evaluated = first.evaluated + full.evaluated;
  r.passes = first.passes + full.passes;
  r.cancelled = full.cancelled;
  r.rescored = keep;
  r.reference = full.reference;
  r.spread.assign(c, 0.0);
  // The others after every kept one: their first-fold scores, shifted past the kept maximum.
  std::vector<bool> is_kept(c, false);
  for (int64_t i = 0; i < keep; ++i) is_kept[kept[i]] = true;
  double kept_max = -std::numeric_limits<double>::infinity(), rest_min = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < keep; ++i) kept_max = std::max(kept_max, full.score[i]);
  for (int64_t i = 0; i < c; ++i)
    if (!is_kept[i]) rest_min = std::min(rest_min, first.score[i]);
  const double shift = kept_max - rest_min + 1.0;
  r.score.resize(c);
  for (int64_t i = 0; i < c; ++i) r.score[i] = first.score[i] + shift;
  for (int64_t i = 0; i < keep; ++i) {
    r.score[kept[i]] = full.score[i];
    r.spread[kept[i]] = full.spread[i];
  }
  return r;
}

int PassesForAgreement(const std::vector<std::vector<double>>& pass_means, double agreement) {
  const int n = static_cast<int>(pass_means.size());
  for (int p = 1; p < n; ++p)
    if (KendallTau(pass_means[p - 1], pass_means.back()) >= agreement) return p;
  return n;
}

}  // namespace tgraph
