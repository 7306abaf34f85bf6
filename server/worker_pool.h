// A fixed pool of inference workers behind bounded queues, one per lane (ranks, layout
// searches, tile searches). A free worker takes the lanes in turn when more than one has
// work, so a rank waits for the jobs already running and at most one job of each other
// lane queued before it, never behind a queue of long searches; each lane refuses work
// when its own queue is full, so searches cannot fill the queue ranks need, and the server
// answers RESOURCE_EXHAUSTED at once instead of slowing every client down. Each lane has
// its own bound: a tile search is milliseconds of work, so a fleet's start-up burst of
// hundreds of them waits in a queue far longer than a layout search's. A job still queued can be withdrawn
// (TryWithdraw): a request cancelled or past its deadline leaves the queue at once, and
// its slot is free for the next.
// Threads: every method may be called from any thread at once; one mutex guards the
// queues, the tickets and the counters. Jobs run on the pool's threads.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tgraph {

enum class Lane : int { kRank = 0, kSearch = 1, kTile = 2 };
inline constexpr int kLanes = 3;
inline const char* LaneName(Lane l) {
  return l == Lane::kRank ? "rank" : l == Lane::kSearch ? "search" : "tile";
}
using LaneCapacities = std::array<int, kLanes>;  // jobs that may wait, by lane

class WorkerPool {
 public:
  // `on_start` runs once in each worker thread before any job (e.g. thread settings).
  // `capacities`: jobs that may wait in each lane.
  WorkerPool(int workers, LaneCapacities capacities, std::function<void()> on_start = nullptr)
      : capacities_(capacities) {
    for (int i = 0; i < workers; ++i)
      threads_.emplace_back([this, on_start] {
        if (on_start) on_start();
        Run();
      });
  }
  ~WorkerPool() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    cv_.SignalAll();
    for (std::thread& t : threads_) t.join();
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // The job's ticket (> 0), or 0 when its lane's capacity of jobs already wait there
  // (running ones do not count) or the pool is stopping.
  uint64_t TrySubmit(Lane lane, std::function<void()> job) {
    uint64_t ticket = 0;
    {
      absl::MutexLock lock(&mu_);
      std::deque<Queued>& q = lanes_[static_cast<size_t>(lane)];
      if (stopping_ || static_cast<int>(q.size()) >= capacities_[static_cast<size_t>(lane)]) return 0;
      ticket = ++last_ticket_;
      q.push_back({ticket, std::move(job)});
    }
    cv_.Signal();
    return ticket;
  }
  // True when the job was still queued: it is removed and will never run (it is
  // destroyed here, on the caller's thread). False when a worker has taken it.
  bool TryWithdraw(uint64_t ticket) {
    std::function<void()> removed;  // destroyed after the lock is released
    absl::MutexLock lock(&mu_);
    for (size_t l = 0; l < lanes_.size(); ++l)
      for (auto it = lanes_[l].begin(); it != lanes_[l].end(); ++it)
        if (it->ticket == ticket) {
          removed = std::move(it->job);
          lanes_[l].erase(it);
          ++withdrawn_[l];
          return true;
        }
    return false;
  }
  int64_t queued(Lane lane) const {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(lanes_[static_cast<size_t>(lane)].size());
  }
  int64_t queued() const {
    absl::MutexLock lock(&mu_);
    int64_t n = 0;
    for (const auto& q : lanes_) n += static_cast<int64_t>(q.size());
    return n;
  }
  int64_t running() const {
    absl::MutexLock lock(&mu_);
    return running_;
  }
  // Jobs withdrawn from `lane` since the start.
  int64_t withdrawn(Lane lane) const {
    absl::MutexLock lock(&mu_);
    return withdrawn_[static_cast<size_t>(lane)];
  }

 private:
  struct Queued {
    uint64_t ticket;
    std::function<void()> job;
  };

  void Run() {
    while (true) {
      std::function<void()> job;
      {
        absl::MutexLock lock(&mu_);
        while (!stopping_ && !Waiting()) cv_.Wait(&mu_);
        if (!Waiting()) return;  // stopping, and everything queued is done
        // The lanes in turn, from the one after the lane served last.
        for (int k = 0; k < kLanes; ++k) {
          const size_t l = (next_lane_ + static_cast<size_t>(k)) % kLanes;
          if (lanes_[l].empty()) continue;
          job = std::move(lanes_[l].front().job);
          lanes_[l].pop_front();
          next_lane_ = (l + 1) % kLanes;
          break;
        }
        ++running_;
      }
      job();
      job = nullptr;  // what it captured is released before the worker counts as free
      absl::MutexLock lock(&mu_);
      --running_;
    }
  }
  bool Waiting() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& q : lanes_)
      if (!q.empty()) return true;
    return false;
  }

  const LaneCapacities capacities_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // signalled on a submitted job and on stopping
  std::array<std::deque<Queued>, kLanes> lanes_ ABSL_GUARDED_BY(mu_);
  std::array<int64_t, kLanes> withdrawn_ ABSL_GUARDED_BY(mu_){};
  size_t next_lane_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace tgraph
