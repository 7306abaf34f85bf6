// Helpers of the HLO tests (hlo_text_test.cc, hlo_canonical_test.cc).
#pragma once

#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "model/hlo/featurize.h"
#include "model/hlo/hlo_text.h"

namespace tgraph {

// The INVALID_ARGUMENT message of HLO text that must not parse (as "m.hlo").
inline std::string HloTextError(const std::string& text) {
  auto r = hlo::ParseHloText(text, "m.hlo");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

// Fuzzes the module reader: `runs` copies of `text` with 1-8 edits each (a byte
// replaced from `alphabet`, up to 40 bytes erased, one inserted; the first `focus` bytes
// get half the edits), a quarter of them truncated. Each must parse or be
// INVALID_ARGUMENT, and what parses must featurize or be refused, never crash or hang.
// Returns how many parsed.
inline int FuzzModuleReader(const std::string& text, uint64_t seed, int runs, const std::string& alphabet,
                            size_t focus = 0) {
  std::mt19937_64 rng(seed);
  int parsed = 0;
  for (int i = 0; i < runs; ++i) {
    std::string bad = text;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < edits; ++k) {
      const size_t span = focus > 0 && rng() % 2 ? std::min(bad.size(), focus) : bad.size();
      const size_t at = rng() % span;
      switch (rng() % 3) {
        case 0: bad[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: bad.erase(at, 1 + rng() % 40); break;
        default: bad.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
      }
      if (bad.empty()) bad = "H";
    }
    if (rng() % 4 == 0) bad.resize(rng() % bad.size());
    auto r = hlo::ParseModule(bad, "fuzz.hlo");
    if (r.ok()) {
      ++parsed;
      (void)hlo::FeaturizeModule(*r, "fuzz.hlo");  // may be an error; must not crash
    } else {
      CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    }
  }
  return parsed;
}

}  // namespace tgraph
