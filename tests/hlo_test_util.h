// Helpers of the HLO tests (hlo_text_test.cc, hlo_canonical_test.cc).
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "model/hlo/hlo_text.h"

namespace tgraph {

// The INVALID_ARGUMENT message of HLO text that must not parse (as "m.hlo").
inline std::string HloTextError(const std::string& text) {
  auto r = hlo::ParseHloText(text, "m.hlo");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

}  // namespace tgraph
