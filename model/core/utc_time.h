// Wall-clock time for records (manifests, retire markers, fine-tune entries).
// Pure functions of the clock; any thread.
#pragma once

#include <string>

namespace tgraph {

// Current UTC time as "2026-11-22T09:30:00Z".
std::string UtcNow();

}  // namespace tgraph
