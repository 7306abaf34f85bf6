// Layout configurations kept on disk instead of in memory, for collections whose
// configurations do not fit (TpuGraphs' layout:nlp:random holds 16 million of them, a
// few hundred configurable nodes each: tens of GB even base-7 compressed). The loader
// appends a graph's compressed codes (model/core/preprocess.h, CompressedConfigs) once;
// training and validation read the rows they sample with pread, row by row. The kernel's
// page cache is the cache: it keeps the rows read often, is bounded and evicted by the
// kernel, and is not the process's resident memory; the process holds only the rows of
// the step at hand.
//
// The file has no name (created in `dir` and unlinked at once): it is gone when the
// process ends, however it ends, and two processes never share one. It takes
// 12 bytes per configuration and configurable node on the disk of `dir`.
//
// Threads: Append is for one thread at a time (the loader); ReadRows may run on any
// number of threads at once, also during an Append of other rows.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tgraph {

class ConfigSpill {
 public:
  // A new, unnamed spill file in `dir` (which must exist). Errors name the directory.
  static absl::StatusOr<std::shared_ptr<ConfigSpill>> Create(const std::string& dir);
  ~ConfigSpill();
  ConfigSpill(const ConfigSpill&) = delete;
  ConfigSpill& operator=(const ConfigSpill&) = delete;

  // Appends codes (configurations x configurable nodes x 3) and returns their offset
  // in codes. A full disk is RESOURCE_EXHAUSTED, naming the directory.
  absl::StatusOr<int64_t> Append(const std::vector<uint32_t>& codes);

  // Rows `rows` of the configurations appended at `offset` (num_config_nodes per row),
  // decoded into out: rows.size() x num_config_nodes x 18 int8 values.
  absl::Status ReadRows(int64_t offset, int64_t num_config_nodes, const std::vector<int64_t>& rows,
                        int8_t* out) const;

  // Bytes written so far.
  int64_t bytes() const;
  const std::string& dir() const { return dir_; }

 private:
  ConfigSpill(int fd, std::string dir) : fd_(fd), dir_(std::move(dir)) {}
  int fd_;
  std::string dir_;
  mutable std::mutex mu_;  // guards size_ (appends)
  int64_t size_ = 0;
};

}  // namespace tgraph
