// A thread-safe LRU cache bounded by a byte budget, with hit/miss/eviction counters.
// The server keys it by (graph hash, model version) and stores the pruned graph and
// its configuration-independent tensors; values are shared, so an entry evicted while
// a request still uses it stays alive until that request ends.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <unordered_map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tgraph {

struct CacheStats {
  int64_t hits = 0, misses = 0, evictions = 0;
  int64_t entries = 0, bytes = 0, budget_bytes = 0;
};

template <typename Key, typename Value, typename Hash = std::hash<Key>>
class LruCache {
 public:
  explicit LruCache(int64_t budget_bytes) : budget_(budget_bytes) {}

  // The value, marked most recently used; nullptr (a miss) when absent.
  std::shared_ptr<const Value> Get(const Key& key) {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return nullptr;
    }
    ++stats_.hits;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->value;
  }

  // Inserts or replaces; evicts least recently used entries until the budget holds.
  // An entry larger than the whole budget is not kept (but the caller still has it).
  void Put(const Key& key, std::shared_ptr<const Value> value, int64_t bytes) {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      stats_.bytes -= it->second->bytes;
      order_.erase(it->second);
      index_.erase(it);
    }
    if (bytes > budget_) return;
    order_.push_front({key, std::move(value), bytes});
    index_[key] = order_.begin();
    stats_.bytes += bytes;
    while (stats_.bytes > budget_ && !order_.empty()) {
      const Entry& victim = order_.back();
      stats_.bytes -= victim.bytes;
      index_.erase(victim.key);
      order_.pop_back();
      ++stats_.evictions;
    }
  }

  // Drops every entry for which pred(key) is true (e.g. a model version unloaded).
  int64_t EraseIf(const std::function<bool(const Key&)>& pred) {
    absl::MutexLock lock(&mu_);
    int64_t erased = 0;
    for (auto it = order_.begin(); it != order_.end();) {
      if (pred(it->key)) {
        stats_.bytes -= it->bytes;
        index_.erase(it->key);
        it = order_.erase(it);
        ++erased;
      } else {
        ++it;
      }
    }
    return erased;
  }

  CacheStats Stats() const {
    absl::MutexLock lock(&mu_);
    CacheStats s = stats_;
    s.entries = static_cast<int64_t>(order_.size());
    s.budget_bytes = budget_;
    return s;
  }

 private:
  struct Entry {
    Key key;
    std::shared_ptr<const Value> value;
    int64_t bytes;
  };
  const int64_t budget_;
  mutable absl::Mutex mu_;
  std::list<Entry> order_ ABSL_GUARDED_BY(mu_);  // most recently used first
  std::unordered_map<Key, typename std::list<Entry>::iterator, Hash> index_ ABSL_GUARDED_BY(mu_);
  CacheStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tgraph
