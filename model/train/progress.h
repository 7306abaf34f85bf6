// What a training process says while it works: the progress line on stderr and the
// figures it reports (duration, peak RSS). Used by the fold loop's thread only.
#pragma once

#include <cstdint>
#include <string>

namespace tgraph {

// "1h05m" or "3m07s"; "?" when not finite or negative.
std::string Duration(double seconds);

// This process's peak resident set so far, in bytes.
int64_t PeakRssBytes();

// The progress line of one fold: redrawn in place on a terminal, every 10% otherwise.
class FoldProgress {
 public:
  // total_steps over steps_per_epoch steps an epoch (epochs for the line); the fold
  // resumed at start_step (the ETA counts the steps of this process only).
  FoldProgress(int fold, int64_t total_steps, int64_t steps_per_epoch, double epochs, int64_t start_step);
  void Report(int64_t step, double elapsed_s, double loss, double score, double best);

 private:
  int fold_;
  int64_t total_, per_epoch_;
  double epochs_;
  int64_t start_step_;
  bool tty_;
  int last_report_ = -1;
};

}  // namespace tgraph
