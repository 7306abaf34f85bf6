// Small helpers shared by the command-line tools.
#pragma once

#include <algorithm>
#include <cstring>
#include <thread>
#include <string>
#include <vector>

namespace tgraph {

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

// A --threads style flag: the value when positive, else every core of the machine.
inline int ThreadsOrCores(int flag) {
  return flag > 0 ? flag : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace tgraph
