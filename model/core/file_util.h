// Whole-file reads and crash-safe writes (temporary file, fsync, rename).
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tgraph {

absl::StatusOr<std::string> ReadFile(const std::string& path);

// A PEM file (TLS certificates and keys) for `what` (e.g. "--tls_cert"): its content, or
// an error naming `what` and the file when it cannot be read or holds no PEM block
// whose label contains `label` ("CERTIFICATE", "PRIVATE KEY").
absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view what, absl::string_view label);

// Writes to "<path>.tmp.<pid>", fsyncs it, renames it over path and fsyncs the
// directory: a reader sees either the old content or the new one, never a mix. Only a
// regular file is replaced (ReplaceableFile).
absl::Status WriteFileAtomic(const std::string& path, absl::string_view content);

// OK when `path` does not exist or is a regular file; else FAILED_PRECONDITION naming
// what it is (a symbolic link, a directory, a FIFO, a device...): renaming a new file
// over it would replace the link rather than write where it points, or turn /dev/full
// into a regular file. Every writer that renames over a path asks this first.
absl::Status ReplaceableFile(const std::string& path);

// Where a tool writes a file it was given by `flag` (e.g. "--out"): INVALID_ARGUMENT for
// a path that is not a regular file (ReplaceableFile), ALREADY_EXISTS for an existing
// file unless `force` (the tools' --force): a tool never replaces what it was pointed at
// without being asked to.
absl::Status CheckOutputFile(const std::string& path, absl::string_view flag, bool force);

// A failed system call as a status whose code says what a caller can do about it: a
// full disk, a quota or a file-size limit (ENOSPC, EDQUOT, EFBIG) is RESOURCE_EXHAUSTED, no permission (EACCES,
// EPERM) PERMISSION_DENIED, a read-only file system (EROFS) FAILED_PRECONDITION,
// anything else INTERNAL. The message is "<what>: <strerror>".
absl::Status ErrnoStatus(int err, absl::string_view what);

// fsync of a file, and of the directory that holds a path (so that a rename into it
// survives a crash).
absl::Status FsyncFile(const std::string& path);
absl::Status FsyncParentDir(const std::string& path);

}  // namespace tgraph
