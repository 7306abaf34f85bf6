// A budget of bytes shared by concurrent work (every tgraph.v1.Ranker call: each holds
// its request's bytes and what they become while it runs, a module's registration also
// the working memory its reader reserves as it goes: model/hlo/working_memory.h, a search
// its rows: SearchWorkingBytes, server/search_jobs.h).
// TryAcquire and Grow never wait: past the budget the caller answers
// RESOURCE_EXHAUSTED and the client retries later, so memory stays bounded whatever
// the number of concurrent requests. One request larger than the whole budget is still
// admitted when nothing else holds any (--max_message_bytes bounds it); growing past
// the budget is always refused.
// Threads: any; one mutex guards held_ and holders_. A Lease belongs to one request.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tgraph {

class ByteBudget {
 public:
  explicit ByteBudget(int64_t bytes) : budget_(bytes) {}

  // Returned by TryAcquire; gives its bytes back when destroyed.
  class Lease {
   public:
    Lease(ByteBudget* b, int64_t bytes) : b_(b), bytes_(bytes) {}
    Lease(Lease&& o) noexcept : b_(o.b_), bytes_(o.bytes_) { o.b_ = nullptr; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (b_) b_->Release(bytes_);
    }
    // Holds `bytes` more; false (holding nothing more) when that would pass the budget.
    bool Grow(int64_t bytes) {
      if (!b_->TryGrow(bytes)) return false;
      bytes_ += bytes;
      return true;
    }
    int64_t bytes() const { return bytes_; }

   private:
    ByteBudget* b_;
    int64_t bytes_;
  };

  std::optional<Lease> TryAcquire(int64_t bytes) {
    absl::MutexLock lock(&mu_);
    if (held_ > 0 && held_ + bytes > budget_) return std::nullopt;
    held_ += bytes;
    ++holders_;
    return Lease(this, bytes);
  }

  int64_t held() const {
    absl::MutexLock lock(&mu_);
    return held_;
  }
  int holders() const {
    absl::MutexLock lock(&mu_);
    return holders_;
  }
  int64_t budget() const { return budget_; }

 private:
  bool TryGrow(int64_t bytes) {
    absl::MutexLock lock(&mu_);
    if (held_ + bytes > budget_) return false;
    held_ += bytes;
    return true;
  }
  void Release(int64_t bytes) {
    absl::MutexLock lock(&mu_);
    held_ -= bytes;
    --holders_;
  }

  const int64_t budget_;
  mutable absl::Mutex mu_;
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
  int holders_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tgraph
