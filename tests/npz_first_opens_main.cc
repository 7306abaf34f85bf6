// Threads that open their first .npz archives at the same moment, in fresh processes:
// libzip 1.7.3 set up what an open needs of its source in unsynchronised statics on
// first use, and now and then such a race refused a new archive as read-only. Each
// round forks a child (a process whose first open has not happened yet) that starts
// the threads behind one barrier; each writes its own archive and reads it back.
//
//   tgraph_npz_first_opens DIR [ROUNDS] [THREADS]     (DIR created; its r*_t*.npz replaced)
// Exit 0 when every round's every write and read succeeded.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "model/core/npy.h"

namespace {

// One child's round: `threads` threads released together, each writing and reading back
// DIR/r<round>_t<i>.npz. Returns the exit status (0: all succeeded).
int RunRound(const std::string& dir, int round, int threads) {
  std::atomic<int> waiting{threads};
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const std::string path = dir + "/r" + std::to_string(round) + "_t" + std::to_string(t) + ".npz";
      const std::vector<int32_t> values = {round, t, 7};
      tgraph::NpzArchive out;
      out["a"] = tgraph::NpyArray::From<int32_t>({3}, values);
      --waiting;
      while (waiting.load() > 0) {
      }
      if (absl::Status s = tgraph::WriteNpz(path, out); !s.ok()) {
        std::fprintf(stderr, "round %d thread %d: %s\n", round, t, s.ToString().c_str());
        ++failures;
        return;
      }
      absl::StatusOr<tgraph::NpzArchive> in = tgraph::ReadNpz(path);
      if (!in.ok() || in->count("a") == 0 || in->at("a").bytes != out["a"].bytes) {
        std::fprintf(stderr, "round %d thread %d: %s read back wrong: %s\n", round, t, path.c_str(),
                     in.ok() ? "other values" : in.status().ToString().c_str());
        ++failures;
      }
    });
  }
  for (std::thread& th : pool) th.join();
  return failures.load() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [ROUNDS] [THREADS]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 400;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 3;
  if (rounds < 1 || threads < 2) {
    std::fprintf(stderr, "ROUNDS must be at least 1 and THREADS at least 2\n");
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "%s: cannot create: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  int failed = 0;
  for (int r = 0; r < rounds; ++r) {
    const pid_t child = fork();
    if (child < 0) {
      std::perror("fork");
      return 1;
    }
    if (child == 0) _exit(RunRound(dir, r, threads));
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  std::printf("%d of %d rounds of %d threads' first opens failed\n", failed, rounds, threads);
  return failed == 0 ? 0 : 1;
}
