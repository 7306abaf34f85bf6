#include "model/store/report_ids.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "model/core/file_util.h"

namespace tgraph {
namespace fs = std::filesystem;

namespace {

constexpr char kReportsDir[] = "reports";

std::string MarkerDir(const std::string& root) { return absl::StrCat(root, "/", kReportsDir); }

// The shard a marker names, absolute; INTERNAL for a marker that names nothing under the
// store's npz/ (a damaged file: the report is refused rather than stored somewhere else).
absl::StatusOr<std::string> ReadMarker(const std::string& root, const std::string& marker) {
  std::ifstream in(marker, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::InternalError(absl::StrCat(marker, ": cannot read the report's marker"));
  const std::string relative(absl::StripAsciiWhitespace(text.str()));
  if (!absl::StartsWith(relative, "npz/") || !absl::EndsWith(relative, ".npz") ||
      relative.find("..") != std::string::npos)
    return absl::InternalError(absl::StrCat(marker, ": names '", relative.substr(0, 200),
                                            "', not a shard under npz/: move the file aside"));
  return absl::StrCat(root, "/", relative);
}

}  // namespace

absl::Status ValidateReportId(const std::string& id) {
  const auto ok = [](char ch) { return absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_'; };
  if (id.empty() || id.size() > 64 || !std::all_of(id.begin(), id.end(), ok))
    return absl::InvalidArgumentError(absl::StrCat("report_id: expected 1-64 of letters, digits, '-' and '_' (a "
                                                   "UUID), got ", id.size(), " characters"));
  return absl::OkStatus();
}

absl::StatusOr<ClaimedShard> ClaimReportShard(const std::string& root, const std::string& id,
                                              const std::string& proposed) {
  if (absl::Status s = ValidateReportId(id); !s.ok()) return s;
  if (!absl::StartsWith(proposed, absl::StrCat(root, "/npz/")))
    return absl::InternalError(absl::StrCat(proposed, " is not under ", root, "/npz"));
  const std::string dir = MarkerDir(root), marker = absl::StrCat(dir, "/", id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(dir, ": create directory"));
  if (fs::exists(marker, ec)) {
    absl::StatusOr<std::string> path = ReadMarker(root, marker);
    if (!path.ok()) return path.status();
    return ClaimedShard{*path, true};
  }
  // The marker whole under a name of this attempt's, then linked to the id's name: the
  // link either makes it (with its content) or finds another writer's.
  static std::atomic<int64_t> attempts{0};
  const std::string tmp = absl::StrCat(marker, ".tmp.", getpid(), ".", attempts++);
  if (absl::Status s = WriteFileAtomic(tmp, absl::StrCat(proposed.substr(root.size() + 1), "\n")); !s.ok()) return s;
  const int linked = ::link(tmp.c_str(), marker.c_str());
  const int e = errno;
  ::unlink(tmp.c_str());
  if (linked != 0 && e != EEXIST) return ErrnoStatus(e, absl::StrCat(marker, ": link"));
  if (linked != 0) {
    absl::StatusOr<std::string> path = ReadMarker(root, marker);
    if (!path.ok()) return path.status();
    return ClaimedShard{*path, true};
  }
  if (absl::Status s = FsyncParentDir(marker); !s.ok()) return s;
  return ClaimedShard{proposed, false};
}

absl::StatusOr<int> RemoveOldReportIds(const std::string& root, double min_age_s) {
  const std::string dir = MarkerDir(root);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return 0;
  const auto now = fs::file_time_type::clock::now();
  int removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto mtime = fs::last_write_time(it->path(), ec);
    if (ec) break;
    if (std::chrono::duration<double>(now - mtime).count() < min_age_s) continue;
    if (fs::remove(it->path(), ec)) ++removed;
    if (ec) break;
  }
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat(dir, ": removing old report ids"));
  return removed;
}

}  // namespace tgraph
