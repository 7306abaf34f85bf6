// Whole-file reads and crash-safe writes (temporary file, fsync, rename).
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tgraph {

absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes to "<path>.tmp.<pid>", fsyncs it, renames it over path and fsyncs the
// directory: a reader sees either the old content or the new one, never a mix.
absl::Status WriteFileAtomic(const std::string& path, absl::string_view content);

}  // namespace tgraph
