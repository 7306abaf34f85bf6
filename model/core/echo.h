// Client input quoted in an error message, cut to a readable length: a message must
// say what was wrong without echoing a megabyte back (gRPC refuses status messages
// over its metadata limit, which would hide the real error).
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tgraph {

inline std::string Echo(absl::string_view input, size_t max_chars = 80) {
  if (input.size() <= max_chars) return std::string(input);
  return absl::StrCat(input.substr(0, max_chars), "... (", input.size(), " bytes)");
}

}  // namespace tgraph
