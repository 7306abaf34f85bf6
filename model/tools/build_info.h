// What was built: the project version and the git commit (cmake/build_info.cmake).
#pragma once

namespace tgraph {

const char* BuildVersion();  // e.g. "0.1.0"
const char* BuildCommit();   // e.g. "84c8d8b1a2f3", "...-dirty" for uncommitted changes, or "unknown"

}  // namespace tgraph
