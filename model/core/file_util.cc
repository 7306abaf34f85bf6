#include "model/core/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace tgraph {
namespace {

absl::Status Errno(absl::string_view path, absl::string_view step) {
  return ErrnoStatus(errno, absl::StrCat(path, ": ", step));
}

}  // namespace

absl::Status ErrnoStatus(int err, absl::string_view what) {
  const std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return absl::ResourceExhaustedError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EROFS:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status FsyncFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno(path, "open for fsync");
  const bool ok = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  return ok ? absl::OkStatus() : ErrnoStatus(err, absl::StrCat(path, ": fsync"));
}

absl::Status FsyncParentDir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(dir, "open directory for fsync");
  const bool ok = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  return ok ? absl::OkStatus() : ErrnoStatus(err, absl::StrCat(dir, ": fsync"));
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat(path, ": read error"));
  return ss.str();
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view what, absl::string_view label) {
  absl::StatusOr<std::string> pem = ReadFile(path);
  if (!pem.ok()) return absl::Status(pem.status().code(), absl::StrCat(what, ": ", pem.status().message()));
  // "-----BEGIN <label>-----", where the label may say more ("RSA PRIVATE KEY").
  for (size_t at = pem->find("-----BEGIN "); at != std::string::npos; at = pem->find("-----BEGIN ", at + 1)) {
    const size_t end = pem->find("-----", at + 11);
    if (end != std::string::npos && absl::string_view(*pem).substr(at + 11, end - at - 11).find(label) !=
                                        absl::string_view::npos)
      return pem;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": ", path, " holds no PEM block '-----BEGIN ...", label, "-----' (expected a PEM file)"));
}

namespace {

// What a non-regular file is, in words.
const char* FileKind(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

absl::Status ReplaceableFile(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return Errno(path, "lstat");
  }
  if (S_ISREG(st.st_mode)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(path, " is ", FileKind(st.st_mode), ", not a regular file: refusing to replace it"));
}

absl::Status CheckOutputFile(const std::string& path, absl::string_view flag, bool force) {
  if (absl::Status s = ReplaceableFile(path); !s.ok())
    return s.code() == absl::StatusCode::kFailedPrecondition
               ? absl::InvalidArgumentError(absl::StrCat(flag, " ", s.message(), "; give a regular file's path"))
               : s;
  struct stat st;
  if (!force && ::lstat(path.c_str(), &st) == 0)
    return absl::AlreadyExistsError(absl::StrCat(flag, " ", path, " exists; pass --force to replace it"));
  return absl::OkStatus();
}

absl::Status WriteFileAtomic(const std::string& path, absl::string_view content) {
  if (absl::Status s = ReplaceableFile(path); !s.ok()) return s;
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(tmp, "open");
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      absl::Status s = Errno(tmp, "write");
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    absl::Status s = Errno(tmp, "fsync/close");
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = Errno(path, "rename");
    ::unlink(tmp.c_str());
    return s;
  }
  return FsyncParentDir(path);
}

}  // namespace tgraph
