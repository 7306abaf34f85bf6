// libFuzzer target: untrusted bytes as a tile measurements CSV (tgraph-featurize tiles).
#include <cstddef>
#include <cstdint>

#include "model/tile/tile_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  (void)tgraph::ParseTileCsv(text, "fuzz.csv", "fuzz GPU", 132);
  return 0;
}
