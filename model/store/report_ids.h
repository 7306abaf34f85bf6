// Reports stored once: a report may carry an id its client chose and reuses when it
// retries (ReportMeasurementsRequest.report_id). Before its shard is written, the store
// makes a marker, <root>/reports/<id>, naming the shard it is stored as (created whole and
// at once, with link(2), and fsynced). A retry of the report, on the same replica or
// another sharing the store, after a restart, or while the first is still writing, finds
// the marker and is given the same shard name: a shard already there is the answer, and
// two writers of the same name leave one shard. Markers older than a day are removed when
// a store opens (a client retries within its deadline, minutes).
// Threads: pure functions of the file system; any thread, any process.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace tgraph {

// A report id: 1 to 64 of letters, digits, '-' and '_' (a UUID fits). INVALID_ARGUMENT
// naming the field otherwise.
absl::Status ValidateReportId(const std::string& id);

struct ClaimedShard {
  std::string path;             // the shard the report is stored as (absolute)
  bool claimed_before = false;  // the id was seen before: `path` is the earlier claim's
};

// The shard path for report `id` in the store at `root`: `proposed` (absolute, under
// root) when the id is new, else the one its marker names. Errors name the marker.
absl::StatusOr<ClaimedShard> ClaimReportShard(const std::string& root, const std::string& id,
                                              const std::string& proposed);

// Removes markers older than `min_age_s` under `root`; returns how many.
absl::StatusOr<int> RemoveOldReportIds(const std::string& root, double min_age_s = 86400);

}  // namespace tgraph
