// A serialized message walked without building it: what parsing it will allocate,
// and its fields that the message type declares, re-encoded without the others.
// ParseModule (featurize.h) scans a module's bytes before parsing them, so that it can
// refuse a module with too many instructions, and reserve its working memory
// (working_memory.h), before protobuf allocates anything; and so that what the
// featurizer never reads (metadata, literals, backend configs: fields our subset of
// the XLA protos does not declare) is never held in memory as unknown fields.
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"

namespace tgraph::hlo {

struct WireScan {
  int64_t instructions = 0;  // messages of type xla.HloInstructionProto (ours), at any depth
  int64_t kept_bytes = 0;    // an upper bound of the re-encoded size (KeepDeclaredFields)
  // An upper bound of what parsing the re-encoded bytes allocates: every message
  // object, string and repeated element, with allocator overhead and the slack of
  // repeated fields' growth.
  int64_t parse_bytes = 0;
};

// `bytes` as a serialized message of `type`: nullopt when they are not one (a
// truncated field, a length past the end, a group, more than 100 nested messages).
// Fields of known numbers but another wire type count as undeclared, as protobuf
// reads them; packed and unpacked repeated scalars are both read.
std::optional<WireScan> ScanWire(absl::string_view bytes, const google::protobuf::Descriptor* type);

// The fields of `bytes` (a message of `type` that ScanWire accepted) that `type`
// declares, recursively, as a serialized message of at most `kept_bytes` bytes.
// Message lengths are written as 5-byte varints (protobuf reads padded varints).
std::string KeepDeclaredFields(absl::string_view bytes, const google::protobuf::Descriptor* type);

}  // namespace tgraph::hlo
