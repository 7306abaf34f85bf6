#include <catch2/catch.hpp>

#include <sched.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/tools/cli.h"

using namespace tgraph;

TEST_CASE("cgroup CPU quotas round up to whole cores, and no limit or junk is 0", "[cli]") {
  CHECK(CgroupQuotaCores("max 100000") == 0);            // v2, no limit
  CHECK(CgroupQuotaCores("200000 100000") == 2);         // v2, limit 2 CPUs
  CHECK(CgroupQuotaCores("150000 100000") == 2);         // 1.5 CPUs: round up
  CHECK(CgroupQuotaCores("50000 100000") == 1);          // half a CPU still gets a thread
  CHECK(CgroupQuotaCores("400000 100000\n") == 4);
  CHECK(CgroupQuotaCores("-1 100000") == 0);             // v1, no limit
  CHECK(CgroupQuotaCores("300000 100000") == 3);         // v1 joined
  CHECK(CgroupQuotaCores("") == 0);                      // file absent
  CHECK(CgroupQuotaCores(" 100000") == 0);
  CHECK(CgroupQuotaCores("abc 100000") == 0);
  CHECK(CgroupQuotaCores("100000 0") == 0);
  CHECK(CgroupQuotaCores("100000x 100000") == 0);
}

TEST_CASE("available cores respect the affinity mask, and thread flags default to them", "[cli]") {
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  const int affinity = CPU_COUNT(&set);
  CHECK(AvailableCores() >= 1);
  CHECK(AvailableCores() <= affinity);
  CHECK(ThreadsOrCores(0) == AvailableCores());
  CHECK(ThreadsOrCores(-3) == AvailableCores());
  CHECK(ThreadsOrCores(5) == 5);
}

TEST_CASE("flag dashes become underscores in names, never in values", "[cli]") {
  std::vector<std::string> args = {"prog", "--official-subset", "--run-dir=/a-b/c-d", "-x-y", "--", "plain-arg"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  NormalizeFlagDashes(static_cast<int>(argv.size()), argv.data());
  CHECK(std::string(argv[1]) == "--official_subset");
  CHECK(std::string(argv[2]) == "--run_dir=/a-b/c-d");
  CHECK(std::string(argv[3]) == "-x-y");
  CHECK(std::string(argv[4]) == "--");
  CHECK(std::string(argv[5]) == "plain-arg");
}

TEST_CASE("cgroup memory limits: v2 max and numbers, v1's unlimited", "[cli]") {
  CHECK(CgroupMemoryLimit("max") == 0);
  CHECK(CgroupMemoryLimit("12884901888") == int64_t{12} << 30);
  CHECK(CgroupMemoryLimit("12884901888\n") == int64_t{12} << 30);
  CHECK(CgroupMemoryLimit("9223372036854771712") == 0);  // cgroup v1 without a limit
  CHECK(CgroupMemoryLimit("") == 0);
  CHECK(CgroupMemoryLimit("lots") == 0);
  CHECK(CgroupMemoryLimit("-1") == 0);
  CHECK(AvailableMemoryBytes() > (int64_t{256} << 20));  // this machine: a limit or MemTotal
}
