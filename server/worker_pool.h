// A fixed pool of inference workers behind a bounded queue. TrySubmit refuses work
// when the queue is full, so the server can answer RESOURCE_EXHAUSTED at once instead
// of slowing every client down.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tgraph {

class WorkerPool {
 public:
  // `on_start` runs once in each worker thread before any job (e.g. thread settings).
  WorkerPool(int workers, int queue_capacity, std::function<void()> on_start = nullptr)
      : capacity_(queue_capacity) {
    for (int i = 0; i < workers; ++i)
      threads_.emplace_back([this, on_start] {
        if (on_start) on_start();
        Run();
      });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False when `queue_capacity` jobs are already waiting (running ones do not count).
  bool TrySubmit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || static_cast<int>(queue_.size()) >= capacity_) return false;
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }
  int64_t queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(queue_.size());
  }
  int64_t running() const {
    std::lock_guard<std::mutex> lock(mu_);
    return running_;
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything queued is done
        job = std::move(queue_.front());
        queue_.pop_front();
        ++running_;
      }
      job();
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
  }

  const int capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  int64_t running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tgraph
