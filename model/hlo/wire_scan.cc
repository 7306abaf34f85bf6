#include "model/hlo/wire_scan.h"

#include <unordered_map>

#include "google/protobuf/message.h"
#include "tgraph/hlo/hlo.pb.h"

namespace tgraph::hlo {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

constexpr int kMaxDepth = 100;           // protobuf's own recursion limit
constexpr int64_t kAlloc = 16;           // malloc's overhead and alignment per allocation
constexpr int64_t kRepeatedSlot = 3 * 8; // a pointer or an 8-byte element, with growth's slack
                                         // (old and doubled arrays live at once)
constexpr int64_t kLengthBytes = 5;      // message lengths as written by KeepDeclaredFields

enum WireType { kVarint = 0, kFixed64 = 1, kLength = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// Reads a varint at *p (< end); false when truncated or longer than 10 bytes.
bool ReadVarint(const char*& p, const char* end, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 70 && p < end; shift += 7) {
    const uint8_t b = static_cast<uint8_t>(*p++);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// The wire type protobuf writes a field with (packed repeated scalars: kLength).
int ScalarWireType(const FieldDescriptor* f) {
  switch (f->type()) {
    case FieldDescriptor::TYPE_DOUBLE:
    case FieldDescriptor::TYPE_FIXED64:
    case FieldDescriptor::TYPE_SFIXED64: return kFixed64;
    case FieldDescriptor::TYPE_FLOAT:
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_SFIXED32: return kFixed32;
    case FieldDescriptor::TYPE_STRING:
    case FieldDescriptor::TYPE_BYTES:
    case FieldDescriptor::TYPE_MESSAGE:
    case FieldDescriptor::TYPE_GROUP: return kLength;
    default: return kVarint;
  }
}

class Walker {
 public:
  explicit Walker(std::string* out) : out_(out) {}

  // One message of `type` in [p, end): false when malformed.
  bool Walk(const char* p, const char* end, const Descriptor* type, int depth) {
    if (depth > kMaxDepth) return false;
    if (type == xla::HloInstructionProto::descriptor()) ++scan_.instructions;
    while (p < end) {
      const char* field_start = p;
      uint64_t tag = 0;
      if (!ReadVarint(p, end, &tag) || (tag >> 3) == 0 || (tag >> 3) > 536870911) return false;
      const int wire = static_cast<int>(tag & 7);
      const int64_t tag_bytes = p - field_start;
      const char* payload = p;
      uint64_t len = 0;
      switch (wire) {
        case kVarint:
          if (!ReadVarint(p, end, &len)) return false;
          break;
        case kFixed64:
        case kFixed32: {
          const size_t n = wire == kFixed64 ? 8 : 4;
          if (static_cast<size_t>(end - p) < n) return false;
          p += n;
          break;
        }
        case kLength:
          if (!ReadVarint(p, end, &len) || len > static_cast<uint64_t>(end - p)) return false;
          payload = p;
          p += len;
          break;
        default: return false;  // groups: XLA never writes them
      }
      const FieldDescriptor* f = type->FindFieldByNumber(static_cast<int>(tag >> 3));
      if (!f) continue;  // undeclared: dropped, as DiscardUnknownFields would
      const int expected = ScalarWireType(f);
      const bool packed = f->is_repeated() && expected != kLength && wire == kLength;
      if (wire != expected && !packed) continue;  // protobuf keeps it as an unknown field: dropped
      if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
        if (!Message(field_start, tag_bytes, payload, p, f, depth)) return false;
      } else {
        Scalar(field_start, payload, p, f, packed);
      }
    }
    return true;
  }

  WireScan scan_;

 private:
  // A sub-message: its tag as read, a 5-byte length patched after its kept fields.
  bool Message(const char* field_start, int64_t tag_bytes, const char* payload, const char* end,
               const FieldDescriptor* f, int depth) {
    const Descriptor* type = f->message_type();
    scan_.parse_bytes += ObjectBytes(type) + kAlloc + (f->is_repeated() ? kRepeatedSlot : 0);
    scan_.kept_bytes += tag_bytes + kLengthBytes;
    if (!out_) return Walk(payload, end, type, depth + 1);
    out_->append(field_start, static_cast<size_t>(tag_bytes));
    const size_t at = out_->size();
    out_->append(kLengthBytes, '\0');
    if (!Walk(payload, end, type, depth + 1)) return false;
    uint64_t len = out_->size() - at - kLengthBytes;
    for (int64_t i = 0; i < kLengthBytes; ++i, len >>= 7)
      (*out_)[at + static_cast<size_t>(i)] = static_cast<char>((len & 0x7f) | (i + 1 < kLengthBytes ? 0x80 : 0));
    return true;
  }

  void Scalar(const char* field_start, const char* payload, const char* end, const FieldDescriptor* f, bool packed) {
    const int64_t size = end - field_start;
    scan_.kept_bytes += size;
    if (out_) out_->append(field_start, static_cast<size_t>(size));
    if (f->type() == FieldDescriptor::TYPE_STRING || f->type() == FieldDescriptor::TYPE_BYTES) {
      // A heap std::string (32 bytes) and its characters, two allocations.
      scan_.parse_bytes += 32 + (end - payload) + 1 + 2 * kAlloc + (f->is_repeated() ? kRepeatedSlot : 0);
    } else if (packed) {
      int64_t elements = 0;
      const int wire = ScalarWireType(f);
      if (wire == kVarint) {
        for (const char* q = payload; q < end; ++q) elements += (static_cast<uint8_t>(*q) & 0x80) == 0;
      } else {
        elements = (end - payload) / (wire == kFixed64 ? 8 : 4);
      }
      scan_.parse_bytes += elements * kRepeatedSlot + kAlloc;
    } else if (f->is_repeated()) {
      scan_.parse_bytes += kRepeatedSlot;
    }
  }

  int64_t ObjectBytes(const Descriptor* type) {
    auto it = sizes_.find(type);
    if (it != sizes_.end()) return it->second;
    const google::protobuf::Message* proto = google::protobuf::MessageFactory::generated_factory()->GetPrototype(type);
    const int64_t bytes = proto ? static_cast<int64_t>(proto->SpaceUsedLong()) : 1024;
    sizes_.emplace(type, bytes);
    return bytes;
  }

  std::string* out_;
  std::unordered_map<const Descriptor*, int64_t> sizes_;
};

}  // namespace

std::optional<WireScan> ScanWire(absl::string_view bytes, const google::protobuf::Descriptor* type) {
  Walker w(nullptr);
  if (!w.Walk(bytes.data(), bytes.data() + bytes.size(), type, 0)) return std::nullopt;
  w.scan_.parse_bytes += 1024;  // the root object
  return w.scan_;
}

std::string KeepDeclaredFields(absl::string_view bytes, const google::protobuf::Descriptor* type) {
  std::string out;
  Walker w(&out);
  w.Walk(bytes.data(), bytes.data() + bytes.size(), type, 0);
  return out;
}

}  // namespace tgraph::hlo
