// Small helpers shared by the command-line tools.
#pragma once

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "model/tools/tool.h"

namespace tgraph {

// Help of the inference flags the server, tgraph-eval and tgraph-bench-model share
// (same names, same defaults: they must score alike).
inline constexpr char kPrecisionFlagHelp[] =
    "Inference precision of the graph blocks' matmuls: auto (bf16 where the CPU has avx512_bf16, else fp32), bf16 "
    "or fp32";
inline constexpr char kTtaAgreementFlagHelp[] =
    "With --scoring batch: a fold stops its permutation passes (at most --tta) once two successive passes rank the "
    "configurations alike to this Kendall tau; 0 runs every pass";

// Lets users write flags with dashes (--official-subset) as well as Abseil's
// underscores (--official_subset): rewrites "--a-b[=v]" to "--a_b[=v]" in place.
inline void NormalizeFlagDashes(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* a = argv[i];
    if (std::strncmp(a, "--", 2) != 0 || a[2] == '\0') continue;
    for (char* p = a + 2; *p && *p != '='; ++p)
      if (*p == '-') *p = '_';
  }
}

// The whole CPUs a cgroup CPU quota allows, rounded up; 0 when there is no limit or
// the text is not one. `text` is cgroup v2's cpu.max ("max 100000", "150000 100000")
// or, for cgroup v1, cpu.cfs_quota_us and cpu.cfs_period_us joined by a space
// ("-1 100000", "200000 100000").
inline int CgroupQuotaCores(const std::string& text) {
  std::istringstream in(text);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || period <= 0 || quota == "max" || quota.empty() || quota[0] == '-') return 0;
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (*end != '\0' || !(q > 0)) return 0;
  return static_cast<int>(std::ceil(q / period - 1e-9));
}

// CPUs this process may use: its affinity mask, capped by the cgroup CPU quota (a
// Kubernetes CPU limit). std::thread::hardware_concurrency() is the node's core count
// inside a container, which would oversubscribe a limited pod.
// The first line of a (kernel) file, "" when it cannot be read.
inline std::string FirstLine(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

inline int AvailableCores() {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = std::max(1, CPU_COUNT(&set));
  int quota = CgroupQuotaCores(FirstLine("/sys/fs/cgroup/cpu.max"));
  if (quota == 0)
    quota = CgroupQuotaCores(FirstLine("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") + " " +
                             FirstLine("/sys/fs/cgroup/cpu/cpu.cfs_period_us"));
  return quota > 0 ? std::min(cores, quota) : cores;
}

// A cgroup memory limit in bytes from the text of cgroup v2's memory.max ("max",
// "12884901888") or v1's memory.limit_in_bytes (a huge number when unlimited); 0 when
// there is no limit or the text is not one.
inline int64_t CgroupMemoryLimit(const std::string& text) {
  std::istringstream in(text);
  std::string v;
  if (!(in >> v) || v == "max" || v.empty() || v[0] == '-') return 0;
  char* end = nullptr;
  const double bytes = std::strtod(v.c_str(), &end);
  if (*end != '\0' || !(bytes > 0) || bytes >= 9.0e18) return 0;  // v1's "unlimited" is about 2^63
  return static_cast<int64_t>(bytes);
}

// The memory this process may use: its cgroup limit (a Kubernetes memory limit), else
// the machine's MemTotal.
inline int64_t AvailableMemoryBytes() {
  int64_t limit = CgroupMemoryLimit(FirstLine("/sys/fs/cgroup/memory.max"));
  if (limit == 0) limit = CgroupMemoryLimit(FirstLine("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
  if (limit > 0) return limit;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  while (meminfo >> key >> kb) {
    if (key == "MemTotal:") return kb * 1024;
    meminfo.ignore(256, '\n');
  }
  return 0;
}

// LibTorch's intra-op threads are OpenMP (libgomp) threads, which by default spin
// after each parallel region; OpenBLAS runs the matmuls on threads of its own. On a
// small machine the spinning threads take the cores OpenBLAS needs (measured on 2
// cores: 2.2x the server's throughput under load and 1.5x the training speed with
// passive waiting). libgomp reads OMP_WAIT_POLICY once, when it is
// loaded, so the only way to change it is before the process starts: when the
// variable is unset, set it to PASSIVE and re-execute this binary (same pid, same
// arguments). An explicit OMP_WAIT_POLICY is left alone. Call first thing in main().
inline void ReexecWithPassiveOpenMpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  // The binary's real path, not /proc/self/exe: the kernel names a process after the
  // file it executes, and "exe" would hide the tool from ps, top and pkill.
  char path[4096];
  const ssize_t len = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (len > 0) {
    path[len] = '\0';
    execv(path, argv);
  }
  execv("/proc/self/exe", argv);
  // exec failed (no /proc?): carry on with the spinning default.
}

// The main() of a tool that runs LibTorch and takes no positional argument:
// ReexecWithPassiveOpenMpWait, ParseToolFlags (tool.h) with `usage`, then `run`, whose
// exit status it returns.
template <typename Run>
int RunTorchTool(int argc, char** argv, const char* usage, Run run) {
  ReexecWithPassiveOpenMpWait(argv);
  ParseToolFlags(argc, argv, usage);
  return run();
}

// The OpenMP wait policy this process runs with, for startup logs.
inline std::string OpenMpWaitPolicy() {
  const char* v = std::getenv("OMP_WAIT_POLICY");
  return v ? v : "unset (libgomp default: spin, then sleep)";
}

// A --threads style flag: the value when positive, else every core this process may
// use (AvailableCores).
inline int ThreadsOrCores(int flag) { return flag > 0 ? flag : AvailableCores(); }

}  // namespace tgraph
