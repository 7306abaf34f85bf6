#include "model/train/progress.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_format.h"

namespace tgraph {

std::string Duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = static_cast<int64_t>(s);
  return t >= 3600 ? absl::StrFormat("%dh%02dm", t / 3600, (t / 60) % 60) : absl::StrFormat("%dm%02ds", t / 60, t % 60);
}

int64_t PeakRssBytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

FoldProgress::FoldProgress(int fold, int64_t total_steps, int64_t steps_per_epoch, double epochs, int64_t start_step)
    : fold_(fold),
      total_(total_steps),
      per_epoch_(steps_per_epoch),
      epochs_(epochs),
      start_step_(start_step),
      tty_(isatty(fileno(stderr))) {}

void FoldProgress::Report(int64_t step, double elapsed_s, double loss, double score, double best) {
  const double frac = static_cast<double>(step) / static_cast<double>(total_);
  const double eta =
      elapsed_s / std::max<double>(1, static_cast<double>(step - start_step_)) * static_cast<double>(total_ - step);
  const int width = 24, filled = static_cast<int>(frac * width);
  const std::string bar =
      std::string(filled, '=') + (filled < width ? ">" : "") + std::string(std::max(0, width - filled - 1), ' ');
  const int pct = static_cast<int>(frac * 100);
  if (!tty_ && pct / 10 == last_report_ && step != total_) return;
  // No best yet while validation may not keep weights (--select_from) or scored nothing.
  const std::string best_text = std::isfinite(best) ? absl::StrFormat("%.4f", best) : "-";
  std::fprintf(stderr, "%sfold %d epoch %.1f/%.1f [%s] loss %.4f valid %.4f best %s ETA %s%s", tty_ ? "\r" : "",
               fold_, static_cast<double>(step) / static_cast<double>(per_epoch_), epochs_, bar.c_str(), loss, score,
               best_text.c_str(), Duration(eta).c_str(), tty_ && step < total_ ? "" : "\n");
  std::fflush(stderr);
  last_report_ = pct / 10;
}

}  // namespace tgraph
