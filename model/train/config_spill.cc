#include "model/train/config_spill.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "model/core/file_util.h"
#include "model/core/graph.h"
#include "model/core/preprocess.h"

namespace tgraph {

absl::StatusOr<std::shared_ptr<ConfigSpill>> ConfigSpill::Create(const std::string& dir) {
  std::string path = dir + "/.tgraph-config-spill.XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat(dir, ": create the configuration spill file"));
  unlink(path.c_str());  // unnamed from now on: gone with the process
  posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);  // rows are read at random: no read-ahead
  return std::shared_ptr<ConfigSpill>(new ConfigSpill(fd, dir));
}

ConfigSpill::~ConfigSpill() { close(fd_); }

int64_t ConfigSpill::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size_;
}

absl::StatusOr<int64_t> ConfigSpill::Append(const std::vector<uint32_t>& codes) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t start = size_;
  const char* p = reinterpret_cast<const char*>(codes.data());
  size_t left = codes.size() * sizeof(uint32_t);
  int64_t at = start;
  while (left > 0) {
    const ssize_t n = pwrite(fd_, p, left, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      // Leave size_ where it was: a later append overwrites the partial write.
      return ErrnoStatus(err, absl::StrCat(dir_, ": write the configuration spill file (--spill_dir)"));
    }
    p += n;
    left -= static_cast<size_t>(n);
    at += n;
  }
  size_ = at;
  return start / static_cast<int64_t>(sizeof(uint32_t));
}

absl::Status ConfigSpill::ReadRows(int64_t offset, int64_t num_config_nodes, const std::vector<int64_t>& rows,
                                   int8_t* out) const {
  const int64_t per_row = num_config_nodes * kConfigGroups;
  std::vector<uint32_t> codes(static_cast<size_t>(per_row));
  const size_t row_bytes = codes.size() * sizeof(uint32_t);
  for (size_t r = 0; r < rows.size(); ++r) {
    const off_t at = static_cast<off_t>((offset + rows[r] * per_row) * static_cast<int64_t>(sizeof(uint32_t)));
    char* p = reinterpret_cast<char*>(codes.data());
    size_t left = row_bytes, done = 0;
    while (left > 0) {
      const ssize_t n = pread(fd_, p + done, left, at + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        return n < 0 ? ErrnoStatus(errno, absl::StrCat(dir_, ": read the configuration spill file"))
                     : absl::DataLossError(absl::StrCat(dir_, ": the configuration spill file ends before row ",
                                                        rows[r], " at offset ", offset));
      done += static_cast<size_t>(n);
      left -= static_cast<size_t>(n);
    }
    int8_t* dst = out + static_cast<int64_t>(r) * per_row * kLayoutSlots;
    for (int64_t k = 0; k < per_row; ++k) DecodeLayoutGroup(codes[static_cast<size_t>(k)], dst + k * kLayoutSlots);
  }
  return absl::OkStatus();
}

}  // namespace tgraph
