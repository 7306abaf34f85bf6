#include "model/core/config_rows.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "model/core/graph.h"

namespace tgraph {

std::string FirstBadLayoutConfigValue(const int8_t* values, size_t n, int64_t nc) {
  for (size_t i = 0; i < n; ++i)
    if (values[i] < kLayoutValueMin || values[i] > kLayoutValueMax)
      return absl::StrCat("config ", i / (nc * kConfigFeatDim), ", configurable node ", (i / kConfigFeatDim) % nc,
                          ", slot ", i % kConfigFeatDim, " is ", static_cast<int>(values[i]), ", expected ",
                          kLayoutValueMin, "..", kLayoutValueMax);
  return "";
}

std::string FirstBadTileConfigValue(const float* values, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i]) || values[i] < 0)
      return absl::StrCat("config ", i / kTileConfigDim, ", feature ", i % kTileConfigDim, " is ", values[i],
                          ", expected a finite non-negative number");
  return "";
}

}  // namespace tgraph
