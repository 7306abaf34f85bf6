// libFuzzer target: untrusted bytes as an npz, through the reader and the layout and
// tile graph loaders. An input that starts with "PK" is taken as a zip as it is (its
// structure fuzzed); any other is a list of members that this target zips itself, with
// the checksums right, so that mutations reach the .npy headers and the arrays instead
// of stopping at libzip's CRC check: per member, one byte choosing its name from the
// keys the loaders read, three bytes of length (little-endian), then that many bytes of
// .npy (scripts/fuzz writes real files in this form as seeds).
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/core/graph_io.h"
#include "model/core/npy.h"

namespace {

const char* const kKeys[] = {"node_feat", "node_opcode", "edge_index", "node_config_ids", "node_config_feat",
                             "config_runtime", "node_splits", "config_feat", "config_runtime_normalizers"};

void Put(std::string* out, uint64_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) out->push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

// A stored (uncompressed) zip of the members, as numpy.savez writes one.
std::string Zip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out, central;
  for (const auto& [name, data] : members) {
    const uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()),
                                                     static_cast<uInt>(data.size())));
    const size_t offset = out.size();
    Put(&out, 0x04034b50, 4);
    Put(&out, 20, 2);
    Put(&out, 0, 2);
    Put(&out, 0, 2);  // stored
    Put(&out, 0, 4);  // time, date
    Put(&out, crc, 4);
    Put(&out, data.size(), 4);
    Put(&out, data.size(), 4);
    Put(&out, name.size(), 2);
    Put(&out, 0, 2);
    out += name;
    out += data;
    Put(&central, 0x02014b50, 4);
    Put(&central, 20, 2);
    Put(&central, 20, 2);
    Put(&central, 0, 2);
    Put(&central, 0, 2);
    Put(&central, 0, 4);
    Put(&central, crc, 4);
    Put(&central, data.size(), 4);
    Put(&central, data.size(), 4);
    Put(&central, name.size(), 2);
    Put(&central, 0, 2);
    Put(&central, 0, 2);
    Put(&central, 0, 2);
    Put(&central, 0, 2);
    Put(&central, 0, 4);
    Put(&central, offset, 4);
    central += name;
  }
  const size_t at = out.size();
  out += central;
  Put(&out, 0x06054b50, 4);
  Put(&out, 0, 4);
  Put(&out, members.size(), 2);
  Put(&out, members.size(), 2);
  Put(&out, central.size(), 4);
  Put(&out, at, 4);
  Put(&out, 0, 2);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::string zip = bytes;
  if (bytes.compare(0, 2, "PK") != 0) {
    std::vector<std::pair<std::string, std::string>> members;
    for (size_t p = 0; p + 4 <= bytes.size() && members.size() < 9;) {
      const std::string name = std::string(kKeys[static_cast<uint8_t>(bytes[p]) % 9]) + ".npy";
      size_t n = 0;
      for (int b = 2; b >= 0; --b) n = (n << 8) | static_cast<uint8_t>(bytes[p + 1 + static_cast<size_t>(b)]);
      p += 4;
      members.emplace_back(name, bytes.substr(p, n));
      p += std::min(n, bytes.size() - p);
    }
    zip = Zip(members);
  }
  absl::StatusOr<tgraph::NpzArchive> npz = tgraph::ReadNpzFromBuffer(zip, "fuzz.npz");
  if (!npz.ok()) return 0;
  (void)tgraph::LayoutGraphFromNpz(*npz, "fuzz.npz", /*allow_no_configs=*/true);
  (void)tgraph::TileGraphFromNpz(*npz, "fuzz.npz");
  return 0;
}
