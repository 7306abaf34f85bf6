// SHA-256 (OpenSSL) as lowercase hex, incremental or over a file.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tgraph {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t size);
  void U64(uint64_t v) { Update(&v, sizeof v); }  // little-endian hosts only
  std::string HexDigest();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

absl::StatusOr<std::string> Sha256File(const std::string& path);

}  // namespace tgraph
