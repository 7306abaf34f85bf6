// What reading a module may allocate, and who says yes to it. A module's bytes say
// little about what reading it costs: one instruction can be a dozen bytes of text or
// proto and costs about 1.3 kB parsed and featurized (560 of them its 140 features),
// a packed operand id is one byte on the wire and 8 parsed. So the readers
// (ParseModule, ParseHloText, FeaturizeModule) reserve what they are about to
// allocate, from upper bounds computed before allocating (or, for text, as they
// go), through `Limits::reserve`; a refusal stops the call with RESOURCE_EXHAUSTED
// before the memory is taken. The server passes its registration budget
// (server/byte_budget.h); tools pass nothing (unbounded). tests/hlo_memory_test.cc
// checks, with a counting allocator, that what is reserved covers what is allocated on
// worst-case modules.
// Threads: a WorkingMemory belongs to one call on one thread; `reserve` is called
// on that thread.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tgraph::hlo {

struct Limits {
  int64_t max_instructions = 200000;  // over this: RESOURCE_EXHAUSTED, before building them
  // Asked for more working memory (bytes, > 0) before it is allocated; a non-OK status
  // refuses (its message says why: the caller's budget). Unset: everything granted.
  std::function<absl::Status(int64_t bytes)> reserve;
};

// One call's reservations: Reserve asks at once; Charge adds an estimate and asks
// in steps of kStep ahead of use, so that the text parser can charge small amounts
// per instruction without asking each time. reserved() >= everything charged.
class WorkingMemory {
 public:
  static constexpr int64_t kStep = int64_t{1} << 20;

  WorkingMemory(const Limits& limits, absl::string_view what) : limits_(limits), what_(what) {}

  absl::Status Reserve(int64_t bytes) {
    if (bytes <= 0) return absl::OkStatus();
    if (limits_.reserve) {
      if (absl::Status s = limits_.reserve(bytes); !s.ok())
        return absl::Status(s.code(), absl::StrCat(what_, ": reading it needs ", (reserved_ + bytes) >> 20,
                                                   " MiB of working memory or more: ", s.message()));
    }
    reserved_ += bytes;
    return absl::OkStatus();
  }
  absl::Status Charge(int64_t bytes) {
    charged_ += bytes;
    if (charged_ <= reserved_) return absl::OkStatus();
    return Reserve(charged_ - reserved_ + kStep);
  }
  int64_t reserved() const { return reserved_; }

 private:
  const Limits& limits_;
  absl::string_view what_;
  int64_t reserved_ = 0;
  int64_t charged_ = 0;
};

}  // namespace tgraph::hlo
