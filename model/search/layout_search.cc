#include "model/search/layout_search.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_set>
#include <utility>

#include "model/core/rng.h"

namespace tgraph {
namespace {

using Row = std::string;  // nc x 18 layout values, as bytes

struct Scored {
  double score = 0;
  Row row;
  double model = 0;  // the fitness fold's standardised score
};

const int8_t* to_int8(const Row& r) { return reinterpret_cast<const int8_t*>(r.data()); }

bool Better(const Scored& a, const Scored& b) { return a.score != b.score ? a.score < b.score : a.row < b.row; }

// Rows as one contiguous block for the scoring functions.
struct RowBlock {
  std::vector<int8_t> values;
  ConfigRows rows;
  RowBlock(const std::vector<const Row*>& rows_in, int64_t nc) {
    for (const Row* r : rows_in) values.insert(values.end(), r->begin(), r->end());
    rows = ConfigRows{values.data(), nullptr, static_cast<int64_t>(rows_in.size()), nc};
  }
};

class Searcher {
 public:
  Searcher(const std::vector<FoldModel>& folds, const GraphTensors& graph, const LayoutSpace& space,
           const SearchOptions& o, const SearchHooks& hooks)
      : folds_(folds), graph_(graph), space_(space), o_(o), hooks_(hooks), rng_(o.seed * 0x9e3779b97f4a7c15ULL + 1),
        nc_(static_cast<int64_t>(space.nodes.size())) {
    for (int64_t j = 0; j < nc_; ++j)
      for (int g = 0; g < kConfigGroups; ++g)
        if (space.nodes[j].groups[g].candidates.size() > 1) mutable_.emplace_back(j, g);
    if (o.exclude) AddRows(*o.exclude, &excluded_);
    if (o.candidates) {
      std::unordered_set<Row> pool;
      AddRows(*o.candidates, &pool);
      for (const Row& r : pool)
        if (!excluded_.count(r)) pool_.push_back(r);
      std::sort(pool_.begin(), pool_.end());  // deterministic, whatever the set's order
      open_.resize(pool_.size());
      std::iota(open_.begin(), open_.end(), 0);
      open_at_ = open_;
    }
  }

  SearchResult Run();

 private:
  void AddRows(const std::vector<int8_t>& rows, std::unordered_set<Row>* to) const {
    const size_t bytes = static_cast<size_t>(nc_) * kConfigFeatDim;
    for (size_t at = 0; at + bytes <= rows.size(); at += bytes)
      to->emplace(reinterpret_cast<const char*>(rows.data() + at), bytes);
  }
  void SetGroup(Row& r, int64_t j, int g, const GroupLayout& l) const {
    std::memcpy(&r[static_cast<size_t>(j * kConfigFeatDim + g * kLayoutSlots)], l.data(), kLayoutSlots);
  }
  Row RandomRow() {  // with candidates: an open one
    if (o_.candidates)
      return open_.empty() ? Row() : pool_[open_[static_cast<size_t>(rng_.Int(0, static_cast<int64_t>(open_.size()) - 1))]];
    Row r(static_cast<size_t>(nc_ * kConfigFeatDim), static_cast<char>(-1));
    for (const auto& [j, g] : mutable_) {
      const std::vector<GroupLayout>& c = space_.nodes[j].groups[g].candidates;
      SetGroup(r, j, g, c[static_cast<size_t>(rng_.Int(0, static_cast<int64_t>(c.size()) - 1))]);
    }
    return r;
  }
  // One to three groups set to another of their candidates.
  Row Mutate(Row r) {
    const int k = 1 + (rng_.Uniform(0, 1) < 0.5) + (rng_.Uniform(0, 1) < 0.25);
    for (int i = 0; i < k; ++i) {
      const auto& [j, g] = mutable_[static_cast<size_t>(rng_.Int(0, static_cast<int64_t>(mutable_.size()) - 1))];
      const std::vector<GroupLayout>& c = space_.nodes[j].groups[g].candidates;
      SetGroup(r, j, g, c[static_cast<size_t>(rng_.Int(0, static_cast<int64_t>(c.size()) - 1))]);
    }
    return r;
  }
  // Each node's 18 values from one parent or the other.
  Row Crossover(const Row& a, const Row& b) {
    Row r = a;
    for (int64_t j = 0; j < nc_; ++j)
      if (rng_.Bernoulli(0.5))
        std::memcpy(&r[static_cast<size_t>(j * kConfigFeatDim)], &b[static_cast<size_t>(j * kConfigFeatDim)],
                    kConfigFeatDim);
    return r;
  }
  const Row& Tournament() {
    const Scored& a = population_[static_cast<size_t>(rng_.Int(0, static_cast<int64_t>(population_.size()) - 1))];
    const Scored& b = population_[static_cast<size_t>(rng_.Int(0, static_cast<int64_t>(population_.size()) - 1))];
    return Better(a, b) ? a.row : b.row;
  }
  // Marks r evaluated (or about to be); false when it already was.
  bool MarkSeen(const Row& r) {
    if (!seen_.insert(r).second) return false;
    if (o_.candidates) {
      const auto at = std::lower_bound(pool_.begin(), pool_.end(), r);
      if (at != pool_.end() && *at == r) {  // swap it out of open_
        const size_t i = static_cast<size_t>(at - pool_.begin()), k = open_at_[i];
        open_at_[open_.back()] = k;
        std::swap(open_[k], open_.back());
        open_.pop_back();
      }
    }
    return true;
  }
  // The candidate nearest to r among a random sample of those not evaluated yet (empty
  // when none is left).
  Row Nearest(const Row& r) {
    if (open_.empty()) return Row();
    size_t best = 0;
    int64_t best_distance = -1;
    const int64_t sample = std::min<int64_t>(kCandidateSample, static_cast<int64_t>(open_.size()));
    for (int64_t k = 0; k < sample; ++k) {
      const size_t i = open_[static_cast<size_t>(rng_.Int(0, static_cast<int64_t>(open_.size()) - 1))];
      int64_t d = 0;
      for (size_t b = 0; b < r.size(); ++b) d += r[b] != pool_[i][b];
      if (best_distance < 0 || d < best_distance || (d == best_distance && i < best)) {
        best = i;
        best_distance = d;
      }
    }
    return pool_[best];
  }
  // Layout groups in which a and b differ, counted up to `stop` (a large graph has
  // thousands of groups; most rows are far from most anchors).
  static int64_t GroupDistance(const Row& a, const Row& b, int64_t stop) {
    int64_t d = 0;
    for (size_t q = 0; q < a.size() && d < stop; q += kLayoutSlots) d += std::memcmp(&a[q], &b[q], kLayoutSlots) != 0;
    return d;
  }
  // The anchor nearest to r and the distance to it.
  std::pair<const Row*, int64_t> NearestAnchor(const Row& r) const {
    std::pair<const Row*, int64_t> best{nullptr, std::numeric_limits<int64_t>::max()};
    for (const Row& a : anchors_) {
      const int64_t d = GroupDistance(r, a, best.second);
      if (d < best.second) best = {&a, d};
    }
    return best;
  }
  bool InRegion(const Row& r) const {
    if (o_.radius <= 0) return true;
    for (const Row& a : anchors_)
      if (GroupDistance(r, a, o_.radius + 1) <= o_.radius) return true;
    return false;
  }
  // With a radius: r with groups put back to its nearest anchor's until it is within.
  void IntoRegion(Row& r) {
    if (o_.radius <= 0 || anchors_.empty()) return;
    const auto [anchor, distance] = NearestAnchor(r);
    if (distance <= o_.radius) return;
    std::vector<size_t> differ;
    for (size_t q = 0; q < r.size(); q += kLayoutSlots)
      if (std::memcmp(&r[q], &(*anchor)[q], kLayoutSlots) != 0) differ.push_back(q);
    rng_.Shuffle(differ);
    for (size_t i = static_cast<size_t>(o_.radius); i < differ.size(); ++i)
      std::memcpy(&r[differ[i]], &(*anchor)[differ[i]], kLayoutSlots);
  }
  // A row never evaluated nor excluded (with candidates: the nearest open one): marks it
  // seen and keeps it in *out. `region`: first put within the trust region.
  bool Keep(Row r, std::vector<Row>* out, bool region = true) {
    if (region) IntoRegion(r);
    if (o_.candidates && (seen_.count(r) || !std::binary_search(pool_.begin(), pool_.end(), r))) r = Nearest(r);
    if (r.empty() || excluded_.count(r) || !MarkSeen(r)) return false;
    out->push_back(std::move(r));
    return true;
  }
  double Correction(const Row& r) const {
    if (!o_.correction) return 0.0;
    const int8_t* x = reinterpret_cast<const int8_t*>(r.data());
    return weight_ * o_.correction->Predict(x) - (exploration_ > 0 ? exploration_ * o_.correction->Uncertainty(x) : 0.0);
  }
  // The fitness (no correction) of rows outside the search: with the fold against the
  // recorded reference, or hooks.fitness. Empty when cancelled.
  std::vector<double> Fitness(const std::vector<Row>& rows) const;
  // adapt_correction: weight_ and exploration_ from the measured rows; returns the rows
  // it scored (they count as evaluations), -1 when cancelled.
  int64_t AdaptCorrection(CorrectionBlend* blend);
  std::vector<Row> Breed(int64_t n);
  // options.variation's rows, drawn and evaluated into variation_; false when cancelled.
  bool DrawVariation();
  // The first generation evaluated, *spent counting it; false when cancelled.
  bool FirstGeneration(int64_t* spent);
  bool Evaluate(const std::vector<Row>& rows);  // false when cancelled
  void RecordTheReference();
  // The best rows by fitness, scored by every fold and ordered: Finish's steps.
  SearchResult Finish(SearchResult r);
  std::vector<const Scored*> Finalists();
  // Their scores by every fold against the reference (the correction added) and the
  // folds' spread; false when cancelled.
  bool ScoreByEveryFold(const std::vector<const Scored*>& picked, std::vector<double>* score,
                        std::vector<double>* spread);
  // spread_proposals: `order`'s first `wanted` picked one at a time, each with the
  // uncertainty left once those before it are measured (its score updated so); the rest
  // in the order that leaves. False when cancelled.
  bool SpreadPicks(const std::vector<const Scored*>& picked, size_t wanted, std::vector<double>* score,
                   std::vector<size_t>* order);

  const std::vector<FoldModel>& folds_;
  const GraphTensors& graph_;
  const LayoutSpace& space_;
  const SearchOptions& o_;
  const SearchHooks& hooks_;
  Rng rng_;
  const int64_t nc_;
  std::vector<std::pair<int64_t, int>> mutable_;  // (node, group) with more than one candidate
  std::unordered_set<Row> excluded_, seen_;
  std::vector<Row> reference_rows_;
  std::vector<Row> anchors_;  // with a radius: the default and the start rows
  std::vector<Row> pool_;  // options.candidates, distinct and sorted, none excluded
  std::vector<size_t> open_, open_at_;  // pool_ indices not evaluated yet; each one's place in open_
  RecordedReference reference_;
  std::vector<Scored> evaluated_, population_;
  std::vector<Scored> variation_;  // returned after the model's picks, never among them
  double weight_ = 0, exploration_ = 0;  // the correction's, as used (AdaptCorrection)
  CorrectionBlend blend_;
  int64_t blend_rows_ = 0;  // rows AdaptCorrection scored; -1: cancelled
};

std::vector<double> Searcher::Fitness(const std::vector<Row>& rows) const {
  std::vector<double> s;
  if (hooks_.fitness) {
    for (const Row& r : rows) s.push_back(hooks_.fitness(to_int8(r)));
    return s;
  }
  std::vector<const Row*> ptrs;
  for (const Row& r : rows) ptrs.push_back(&r);
  const RowBlock block(ptrs, nc_);
  std::vector<int64_t> idx(rows.size());
  std::iota(idx.begin(), idx.end(), 0);
  return ScoreAgainstRecorded(folds_.front(), graph_, block.rows, idx, reference_, o_.scoring);
}

int64_t Searcher::AdaptCorrection(CorrectionBlend* blend) {
  weight_ = o_.correction_weight;
  exploration_ = o_.exploration;
  if (!o_.correction || !o_.adapt_correction) return 0;
  const MeasuredCorrection& c = *o_.correction;
  const int64_t n = std::min({c.measurements(), kMaxBlendRows, o_.evaluations / 4});
  if (n < kMinBlendRows) return 0;
  std::vector<Row> rows(static_cast<size_t>(n), Row(static_cast<size_t>(nc_ * kConfigFeatDim), 0));
  for (int64_t i = 0; i < n; ++i) c.FittedRow(i, reinterpret_cast<int8_t*>(rows[static_cast<size_t>(i)].data()));
  const std::vector<double> z = Fitness(rows);
  if (z.size() != rows.size()) return -1;
  std::vector<double> loo = c.LeaveOneOut(), y = c.targets();
  loo.resize(static_cast<size_t>(n));
  y.resize(static_cast<size_t>(n));
  *blend = BlendCorrection(z, loo, y, o_.correction_weight);
  weight_ = blend->weight;
  exploration_ = o_.correction_weight > 0 ? o_.exploration * weight_ / o_.correction_weight : o_.exploration;
  return n;
}

// The fixed reference: the start rows, then random rows, recorded by the fitness fold;
// its rows enter the population with their scores as its members.
void Searcher::RecordTheReference() {
  const int64_t size =
      std::max<int64_t>(1, std::min({o_.reference, o_.evaluations / 4,
                                     o_.scoring.max_reference > 0 ? o_.scoring.max_reference : o_.reference}));
  std::vector<Row> rows;
  if (o_.start) {
    std::unordered_set<Row> start;
    AddRows(*o_.start, &start);
    std::vector<Row> sorted(start.begin(), start.end());
    std::sort(sorted.begin(), sorted.end());  // deterministic, whatever the set's order
    for (Row& r : sorted)
      if (static_cast<int64_t>(rows.size()) < size && MarkSeen(r)) rows.push_back(std::move(r));
  }
  for (int tries = 0; static_cast<int64_t>(rows.size()) < size && tries < 20 * size; ++tries) {
    Row r = RandomRow();
    if (!r.empty() && MarkSeen(r)) rows.push_back(std::move(r));
  }
  reference_rows_ = rows;
  std::vector<double> z;
  if (hooks_.fitness) {  // no model: the reference's scores are the fitness itself
    z = Fitness(reference_rows_);
  } else {
    std::vector<const Row*> ptrs;
    for (const Row& r : reference_rows_) ptrs.push_back(&r);
    const RowBlock block(ptrs, nc_);
    reference_ = RecordReference(folds_.front(), graph_, block.rows, o_.scoring);
    for (size_t i = 0; i < reference_rows_.size(); ++i) {
      const double v = reference_.scores[i] - reference_.mean;
      z.push_back(reference_.sd > 0 ? v / reference_.sd : v);
    }
  }
  blend_rows_ = AdaptCorrection(&blend_);
  for (size_t i = 0; i < reference_rows_.size(); ++i)
    evaluated_.push_back({z[i] + Correction(reference_rows_[i]), reference_rows_[i], z[i]});
}

bool Searcher::Evaluate(const std::vector<Row>& rows) {
  if (rows.empty()) return true;
  const std::vector<double> s = Fitness(rows);
  if (s.size() != rows.size()) return false;
  for (size_t i = 0; i < rows.size(); ++i) {
    evaluated_.push_back({s[i] + Correction(rows[i]), rows[i], s[i]});
    population_.push_back(evaluated_.back());
  }
  return true;
}

// n new rows: crossover and mutation of tournament winners, a share of random ones.
std::vector<Row> Searcher::Breed(int64_t n) {
  std::vector<Row> out;
  for (int64_t tries = 0; static_cast<int64_t>(out.size()) < n && tries < 50 * n; ++tries) {
    if (population_.empty() || rng_.Uniform(0, 1) < o_.explore) {
      Keep(RandomRow(), &out);
    } else {
      Row child = rng_.Bernoulli(0.5) ? Crossover(Tournament(), Tournament()) : Tournament();
      Keep(Mutate(std::move(child)), &out);
    }
  }
  return out;
}

bool Searcher::DrawVariation() {
  const int64_t want = std::min(o_.variation, o_.results - 1);
  if (want <= 0 || !o_.variation_parents) return true;
  const size_t bytes = static_cast<size_t>(nc_) * kConfigFeatDim;
  std::vector<Row> parents;
  for (size_t at = 0; at + bytes <= o_.variation_parents->size(); at += bytes)
    parents.emplace_back(reinterpret_cast<const char*>(o_.variation_parents->data() + at), bytes);
  if (parents.empty()) return true;
  std::vector<Row> rows;
  // Not pulled into the trust region: the variation is what the region does not reach.
  for (int64_t tries = 0; static_cast<int64_t>(rows.size()) < want && tries < 50 * want; ++tries) {
    const Row& parent = parents[static_cast<size_t>(rng_.Int(0, static_cast<int64_t>(parents.size()) - 1))];
    Row child = Mutate(parent);  // may draw each group's own value again: then no change
    if (child != parent) Keep(std::move(child), &rows, /*region=*/false);
  }
  if (rows.empty()) return true;
  const std::vector<double> s = Fitness(rows);
  if (s.size() != rows.size()) return false;
  for (size_t i = 0; i < rows.size(); ++i) variation_.push_back({s[i] + Correction(rows[i]), rows[i], s[i]});
  return true;
}

// The first generation: the compiler's default and mutants of it and of the start rows
// (an autotuner's strongest prior: XLA's own choice), beside the random reference.
bool Searcher::FirstGeneration(int64_t* spent) {
  const Row dflt(static_cast<size_t>(nc_ * kConfigFeatDim), static_cast<char>(-1));
  std::vector<Row> first, parents = {dflt};
  if (o_.start) {
    std::unordered_set<Row> start;
    AddRows(*o_.start, &start);
    parents.insert(parents.end(), start.begin(), start.end());
    std::sort(parents.begin() + 1, parents.end());
  }
  const int64_t n = std::min(o_.population / 2, o_.evaluations - *spent);
  if (n > 0) Keep(dflt, &first);
  for (int64_t tries = 0; static_cast<int64_t>(first.size()) < n && tries < 50 * n; ++tries)
    Keep(Mutate(parents[static_cast<size_t>(tries) % parents.size()]), &first);
  if (!Evaluate(first)) return false;
  *spent += static_cast<int64_t>(first.size());
  return true;
}

SearchResult Searcher::Run() {
  SearchResult r;
  if (mutable_.empty()) {  // one point, the compiler's default everywhere: nothing to compare
    const Row only(static_cast<size_t>(nc_ * kConfigFeatDim), static_cast<char>(-1));
    const bool allowed = !o_.candidates || std::binary_search(pool_.begin(), pool_.end(), only);
    if (!excluded_.count(only) && allowed && o_.results > 0) {
      r.rows.assign(only.begin(), only.end());
      r.score = {0.0};
      r.spread = {0.0};
    }
    return r;
  }
  // Every candidate excluded: nothing to propose, and no reference to score against.
  if (o_.candidates && pool_.empty()) return r;
  if (o_.radius > 0) {
    anchors_.emplace_back(static_cast<size_t>(nc_ * kConfigFeatDim), static_cast<char>(-1));
    if (o_.start) {
      std::unordered_set<Row> start;
      AddRows(*o_.start, &start);
      anchors_.insert(anchors_.end(), start.begin(), start.end());
      std::sort(anchors_.begin() + 1, anchors_.end());
    }
  }
  RecordTheReference();
  if (reference_rows_.empty()) return r;
  if (blend_rows_ < 0) {
    r.cancelled = true;
    return r;
  }
  r.correction_weight = weight_;
  r.exploration = exploration_;
  r.blend = blend_;
  r.reference = static_cast<int64_t>(reference_rows_.size());
  for (const Row& x : reference_rows_) r.reference_rows.insert(r.reference_rows.end(), x.begin(), x.end());
  int64_t spent = r.reference + blend_rows_;
  // Drawn before the search breeds, so that it never evaluates them again.
  if (!DrawVariation()) {
    r.cancelled = true;
    return r;
  }
  spent += static_cast<int64_t>(variation_.size());
  population_.clear();
  for (const Scored& s : evaluated_)
    if (InRegion(s.row)) population_.push_back(s);
  if (!FirstGeneration(&spent)) {
    r.cancelled = true;
    return r;
  }
  while (spent < o_.evaluations) {
    const int64_t n = std::min(o_.population, o_.evaluations - spent);
    const std::vector<Row> children = Breed(n);
    if (children.empty()) break;  // the space holds nothing new
    if (!Evaluate(children)) {
      r.cancelled = true;
      return r;
    }
    spent += static_cast<int64_t>(children.size());
    ++r.generations;
    std::sort(population_.begin(), population_.end(), Better);
    if (static_cast<int64_t>(population_.size()) > o_.population) population_.resize(static_cast<size_t>(o_.population));
  }
  r.evaluations = spent;
  return Finish(r);
}

// The best rows by fitness that are not excluded, scored by every fold against the same
// reference, as ScoreConfigs scores rows against a fixed reference (members keep their
// scores as members; each fold's scores standardised by its scores of the reference, then
// averaged): the first fold's are the fitness already computed, the others record the
// reference once each. The best `results` of them.
std::vector<const Scored*> Searcher::Finalists() {
  std::sort(evaluated_.begin(), evaluated_.end(), Better);
  const int64_t finalists = o_.finalists > 0 ? o_.finalists : std::max<int64_t>(2 * o_.results, 32);
  std::vector<const Scored*> picked, outside;
  for (const Scored& s : evaluated_) {
    if (static_cast<int64_t>(picked.size()) >= finalists) break;
    // Start rows are evaluated as the reference whether or not they are candidates; only
    // candidates are proposed.
    const bool allowed = !o_.candidates || std::binary_search(pool_.begin(), pool_.end(), s.row);
    if (excluded_.count(s.row) || !allowed) continue;
    if (InRegion(s.row)) picked.push_back(&s);
    else if (static_cast<int64_t>(outside.size()) < finalists) outside.push_back(&s);
  }
  // Rows beyond the radius only when those within are fewer than the results asked for
  // (candidates far from every measured row, a space nearly exhausted).
  if (static_cast<int64_t>(picked.size()) < o_.results)
    for (size_t i = 0; i < outside.size() && static_cast<int64_t>(picked.size()) < finalists; ++i)
      picked.push_back(outside[i]);
  return picked;
}

bool Searcher::ScoreByEveryFold(const std::vector<const Scored*>& picked, std::vector<double>* score,
                                std::vector<double>* spread) {
  const size_t n = picked.size();
  std::vector<double> sum(n), sum_sq(n);
  for (size_t i = 0; i < n; ++i) {  // the folds' own scores: the correction is added once, after
    sum[i] = picked[i]->model;
    sum_sq[i] = sum[i] * sum[i];
  }
  const size_t models = hooks_.fitness ? 1 : folds_.size();
  if (models > 1) {
    std::vector<const Row*> ref_ptrs, rows;
    for (const Row& x : reference_rows_) ref_ptrs.push_back(&x);
    std::vector<int64_t> member(n, -1), queries;
    for (size_t i = 0; i < n; ++i) {
      const auto at = std::find(reference_rows_.begin(), reference_rows_.end(), picked[i]->row);
      if (at != reference_rows_.end()) member[i] = at - reference_rows_.begin();
      else queries.push_back(static_cast<int64_t>(i));
      rows.push_back(&picked[i]->row);
    }
    const RowBlock ref(ref_ptrs, nc_), block(rows, nc_);
    for (size_t k = 1; k < folds_.size(); ++k) {
      const RecordedReference rec = RecordReference(folds_[k], graph_, ref.rows, o_.scoring);
      const std::vector<double> q = ScoreAgainstRecorded(folds_[k], graph_, block.rows, queries, rec, o_.scoring);
      if (q.size() != queries.size()) return false;
      for (size_t i = 0, qi = 0; i < n; ++i) {
        double z;
        if (member[i] >= 0) {
          const double v = rec.scores[static_cast<size_t>(member[i])] - rec.mean;
          z = rec.sd > 0 ? v / rec.sd : v;
        } else {
          z = q[qi++];
        }
        sum[i] += z;
        sum_sq[i] += z * z;
      }
    }
  }
  const double k = static_cast<double>(models);
  score->assign(n, 0);
  spread->assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    (*score)[i] = sum[i] / k;
    (*spread)[i] = std::sqrt(std::max(0.0, sum_sq[i] / k - (*score)[i] * (*score)[i]));
    (*score)[i] += Correction(picked[i]->row);
  }
  return true;
}

bool Searcher::SpreadPicks(const std::vector<const Scored*>& picked, size_t wanted, std::vector<double>* score,
                           std::vector<size_t>* order) {
  const size_t n = picked.size();
  const auto before = [&](size_t a, size_t b) {
    return (*score)[a] != (*score)[b] ? (*score)[a] < (*score)[b] : picked[a]->row < picked[b]->row;
  };
  MeasuredCorrection pending = *o_.correction;
  std::vector<double> known(n);  // the score without its exploration bonus
  std::vector<MeasuredCorrection::RowState> state(n);
  for (size_t i = 0; i < n; ++i) {
    state[i] = pending.State(to_int8(picked[i]->row));
    known[i] = (*score)[i] + exploration_ * pending.Uncertainty(state[i]);
  }
  const size_t spread = std::min<size_t>(wanted, kMaxSpreadProposals);
  for (size_t k = 0; k <= spread && k < n; ++k) {
    for (size_t i = k; i < n; ++i) {
      const size_t at = (*order)[i];
      pending.Refresh(to_int8(picked[at]->row), &state[at]);
      (*score)[at] = known[at] - exploration_ * pending.Uncertainty(state[at]);
    }
    if (k == spread) {  // the rest, conditioned on every spread pick
      std::sort(order->begin() + static_cast<std::ptrdiff_t>(k), order->end(), before);
      break;
    }
    std::iter_swap(order->begin() + static_cast<std::ptrdiff_t>(k),
                   std::min_element(order->begin() + static_cast<std::ptrdiff_t>(k), order->end(), before));
    pending.AddPending(to_int8(picked[(*order)[k]]->row));
    if (o_.scoring.cancelled && o_.scoring.cancelled()) return false;
  }
  return true;
}

SearchResult Searcher::Finish(SearchResult r) {
  const std::vector<const Scored*> picked = Finalists();
  if (picked.empty()) return r;
  std::vector<double> score, spread;
  if (!ScoreByEveryFold(picked, &score, &spread)) {
    r.cancelled = true;
    return r;
  }
  const size_t n = picked.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const size_t wanted =
      std::min<size_t>(n, static_cast<size_t>(std::max<int64_t>(0, o_.results - static_cast<int64_t>(variation_.size()))));
  if (o_.correction && exploration_ > 0 && o_.spread_proposals) {
    if (!SpreadPicks(picked, wanted, &score, &order)) {
      r.cancelled = true;
      return r;
    }
  } else {
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return score[a] != score[b] ? score[a] < score[b] : picked[a]->row < picked[b]->row;
    });
  }
  order.resize(wanted);
  for (size_t i : order) {
    r.rows.insert(r.rows.end(), picked[i]->row.begin(), picked[i]->row.end());
    r.score.push_back(score[i]);
    r.spread.push_back(spread[i]);
  }
  if (variation_.empty()) return r;
  std::vector<const Scored*> varied;
  for (const Scored& v : variation_) varied.push_back(&v);
  if (!ScoreByEveryFold(varied, &score, &spread)) {
    r.cancelled = true;
    return r;
  }
  for (size_t i = 0; i < varied.size(); ++i) {
    r.rows.insert(r.rows.end(), varied[i]->row.begin(), varied[i]->row.end());
    r.score.push_back(score[i]);
    r.spread.push_back(spread[i]);
  }
  r.variation = static_cast<int64_t>(varied.size());
  return r;
}

}  // namespace

SearchResult SearchLayouts(const std::vector<FoldModel>& folds, const GraphTensors& graph, const LayoutSpace& space,
                           const SearchOptions& options, const SearchHooks& hooks) {
  torch::NoGradGuard no_grad;
  if (folds.empty() || space.nodes.empty()) return {};
  return Searcher(folds, graph, space, options, hooks).Run();
}

}  // namespace tgraph
