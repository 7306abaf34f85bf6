// Working memory of the module readers (model/hlo/working_memory.h): on worst-case
// modules, as text and as protos, and on the real ones, what ParseModule and
// FeaturizeModule reserve covers what they allocate (measured with a counting
// operator new: this binary's own), stays within a few times of it, and a refused
// reservation stops a read before its memory is taken. A binary of its own because
// it replaces the global allocator.
#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>
#include "model/core/file_util.h"
#include "model/hlo/featurize.h"
#include "model/hlo/hlo_print.h"
#include "model/hlo/hlo_text.h"
#include "model/hlo/wire_scan.h"
#include "tgraph/hlo/tuning.pb.h"

namespace {
std::atomic<int64_t> g_live{0}, g_peak{0};
void Count(void* p) {
  const int64_t now = g_live += static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}
}  // namespace

void* operator new(size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  Count(p);
  return p;
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  void* p = std::malloc(n ? n : 1);
  if (p) Count(p);
  return p;
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept {
  if (!p) return;
  g_live -= static_cast<int64_t>(malloc_usable_size(p));
  std::free(p);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, size_t) noexcept { operator delete(p); }
void operator delete[](void* p, size_t) noexcept { operator delete(p); }

namespace {

using tgraph::hlo::Limits;

// What one read (parse and featurize, as the server's DecodeHloModule does) allocated
// at its peak above what was live before, and what it reserved.
struct Read {
  int64_t peak = 0, reserved = 0, nodes = 0;
  absl::Status status;
};

Read ReadModule(const std::string& bytes, int64_t budget = INT64_MAX, int64_t max_instructions = 200000) {
  Read r;
  Limits limits;
  limits.max_instructions = max_instructions;
  limits.reserve = [&](int64_t more) {
    if (r.reserved + more > budget) return absl::ResourceExhaustedError("over the test's budget");
    r.reserved += more;
    return absl::OkStatus();
  };
  const int64_t base = g_live.load();
  g_peak = base;
  {
    absl::StatusOr<tgraph::xla::HloModuleProto> m = tgraph::hlo::ParseModule(bytes, "m", limits);
    if (!m.ok()) {
      r.status = m.status();
    } else {
      absl::StatusOr<tgraph::hlo::ModuleGraph> g = tgraph::hlo::FeaturizeModule(*m, "m", limits);
      r.status = g.status();
      if (g.ok()) r.nodes = g->graph.num_nodes;
    }
  }
  r.peak = g_peak.load() - base;
  return r;
}

std::string AsProto(const std::string& text) {
  auto m = tgraph::hlo::ParseHloText(text, "gen");
  REQUIRE(m.ok());
  return m->SerializeAsString();
}

// Worst cases for bytes per allocated byte, each a valid module.
std::string ChainText(int n) {  // many tiny instructions
  std::string t = "HloModule chain\nENTRY e {\n  p = f32[2]{0} parameter(0)\n  a0 = f32[2]{0} add(p, p)\n";
  for (int i = 1; i < n; ++i) absl::StrAppend(&t, "  a", i, " = f32[2]{0} add(a", i - 1, ", p)\n");
  absl::StrAppend(&t, "  ROOT r = f32[2]{0} negate(a", n - 1, ")\n}\n");
  return t;
}
std::string OperandsText(int n) {  // one operand repeated: a byte or two per reference
  std::string t = "HloModule operands\nENTRY e {\n  p = f32[1]{0} parameter(0)\n  ROOT c = f32[" +
                  std::to_string(n) + "]{0} concatenate(p";
  for (int i = 1; i < n; ++i) t += ",p";
  return t + "), dimensions={0}\n}\n";
}
std::string FusionsText(int n) {  // many called computations
  std::string t = "HloModule fusions\n";
  for (int i = 0; i < n; ++i)
    absl::StrAppend(&t, "f", i, " {\n  x = f32[8]{0} parameter(0)\n  ROOT y = f32[8]{0} multiply(x, x)\n}\n");
  t += "ENTRY e {\n  p = f32[8]{0} parameter(0)\n  c0 = f32[8]{0} fusion(p), kind=kLoop, calls=f0\n";
  for (int i = 1; i < n; ++i) absl::StrAppend(&t, "  c", i, " = f32[8]{0} fusion(c", i - 1, "), kind=kLoop, calls=f", i, "\n");
  return t + "  ROOT r = f32[8]{0} negate(c" + std::to_string(n - 1) + ")\n}\n";
}
std::string TuplesText(int n, int width) {  // tuple shapes: a few bytes per element shape
  std::string shape = "(", operands;
  for (int k = 0; k < width; ++k) {
    shape += k ? ",f32[]" : "f32[]";
    operands += k ? ",p" : "p";
  }
  shape += ")";
  std::string t = "HloModule tuples\nENTRY e {\n  p = f32[] parameter(0)\n";
  for (int i = 0; i < n; ++i) absl::StrAppend(&t, "  t", i, " = ", shape, " tuple(", operands, ")\n");
  return t + "  ROOT r = f32[] negate(p)\n}\n";
}
// Tuple elements used as operands (`%t#k`): each one a get-tuple-element the reader
// makes, from a few bytes of text.
std::string ElementsText(int n, int width) {
  std::string shape = "(", operands;
  for (int k = 0; k < width; ++k) {
    shape += k ? ",f32[]" : "f32[]";
    operands += k ? ",p" : "p";
  }
  shape += ")";
  std::string t = absl::StrCat("HloModule elements\nENTRY e {\n  p = f32[] parameter(0)\n  t = ", shape, " tuple(",
                               operands, ")\n");
  for (int i = 0; i < n; ++i) {
    std::string args;
    for (int k = 0; k < width; ++k) absl::StrAppend(&args, k ? ",t#" : "t#", k);
    absl::StrAppend(&t, "  u", i, " = ", shape, " tuple(", args, ")\n");
  }
  return t + "  ROOT r = f32[] negate(p)\n}\n";
}
std::string AttributesText(int n) {  // windows, labels, slices and padding of many dimensions
  std::string t = "HloModule attributes\nENTRY e {\n  p = f32[1,8,8,1]{3,2,1,0} parameter(0)\n"
                  "  k = f32[3,3,1,1]{3,2,1,0} parameter(1)\n";
  for (int i = 0; i < n; ++i)
    absl::StrAppend(&t, "  c", i,
                    " = f32[1,8,8,1]{3,2,1,0} convolution(p, k), window={size=3x3x1x1x1x1 pad=1_1x1_1x0_0x0_0x0_0x0_0 "
                    "stride=1x1x1x1x1x1}, dim_labels=b01f_01io->b01f\n  s",
                    i, " = f32[1,4,4,1]{3,2,1,0} slice(p), slice={[0:1], [0:8:2], [0:8:2], [0:1]}\n  q", i,
                    " = f32[1,9,9,1]{3,2,1,0} pad(p, p), padding=0_0x0_1x0_1x0_0\n");
  return t + "  ROOT r = f32[1,8,8,1]{3,2,1,0} negate(p)\n}\n";
}
std::string LongNamesText(int n) {  // names longer than std::string's inline buffer
  const std::string pad(200, 'x');
  std::string t = "HloModule names\nENTRY " + std::string(300, 'e') + " {\n  p" + pad + " = f32[2]{0} parameter(0)\n";
  for (int i = 0; i < n; ++i) absl::StrAppend(&t, "  a", i, pad, " = f32[2]{0} negate(p", pad, ")\n");
  return t + "  ROOT r = f32[2]{0} negate(p" + pad + ")\n}\n";
}

// The checks every module gets: read OK, what it reserved covers its peak, and is not
// more than a few times the peak.
void CheckReservationCovers(const std::string& name, const std::string& bytes) {
  const Read r = ReadModule(bytes);
  INFO(name << ": " << bytes.size() << " bytes, peak " << r.peak << ", reserved " << r.reserved);
  REQUIRE(r.status.ok());
  std::printf("%-28s %10zu bytes  %7lld nodes  peak %6.1f MB (%5.1fx)  reserved %6.1f MB (%.2f of peak)\n",
              name.c_str(), bytes.size(), static_cast<long long>(r.nodes), r.peak / 1e6,
              static_cast<double>(r.peak) / static_cast<double>(bytes.size()), r.reserved / 1e6,
              static_cast<double>(r.reserved) / static_cast<double>(r.peak));
  CHECK(r.reserved >= r.peak);
  CHECK(r.reserved <= 3 * r.peak + (int64_t{4} << 20));
}

const std::string kReal = TGRAPH_REAL_DATA;

std::string RealUnetModule() {
  tgraph::xla::ModuleTuningData data;
  const std::string bytes = *tgraph::ReadFile(kReal + "/module_tuning_data_layout.pb");
  REQUIRE(data.ParseFromString(bytes));
  return data.module().SerializeAsString();
}

}  // namespace

TEST_CASE("what a module's reader reserves covers what it allocates, as text and as a proto", "[hlo][memory]") {
  const std::vector<std::pair<std::string, std::string>> texts = {
      {"tiny instructions", ChainText(50000)},     {"an operand 500,000 times", OperandsText(500000)},
      {"10,000 fusions", FusionsText(10000)},      {"tuples of 64", TuplesText(3000, 64)},
      {"windows, slices, padding", AttributesText(5000)}, {"long names", LongNamesText(20000)},
      {"tuple elements as operands", ElementsText(3000, 64)}};
  for (const auto& [name, text] : texts) {
    CheckReservationCovers(name + ", text", text);
    CheckReservationCovers(name + ", proto", AsProto(text));
  }
}

TEST_CASE("what the real modules' reader reserves covers what it allocates", "[hlo][memory][real]") {
  const std::string unet = RealUnetModule();
  CheckReservationCovers("real unet_3d, proto", unet);
  auto parsed = tgraph::hlo::ParseModule(unet, "unet");
  REQUIRE(parsed.ok());
  CheckReservationCovers("real unet_3d, text", tgraph::hlo::PrintHloText(*parsed));
  CheckReservationCovers("real graphsage_tf.hlo", *tgraph::ReadFile(kReal + "/hlo/graphsage_tf.hlo"));
  for (const char* dump : {"before_optimizations", "sm_9.0a_gpu_after_optimizations"})
    for (const char* ext : {".txt", ".hlo.pb"})
      CheckReservationCovers(absl::StrCat("real JAX ", dump, ext),
                             *tgraph::ReadFile(absl::StrCat(kReal, "/hlo/jax/mlp_train_step.", dump, ext)));
}

TEST_CASE("a proto's fields the featurizer never reads are not kept in memory", "[hlo][memory]") {
  // 2,000 instructions, each with 10 kB of a field our subset does not declare (as
  // XLA's metadata and literals are): 20 MB of module, a few of it held.
  tgraph::xla::HloModuleProto m;
  auto parsed = tgraph::hlo::ParseHloText(ChainText(2000), "chain");
  REQUIRE(parsed.ok());
  m = *parsed;
  for (auto& inst : *m.mutable_computations(0)->mutable_instructions())
    inst.GetReflection()->MutableUnknownFields(&inst)->AddLengthDelimited(7, std::string(10000, 'm'));
  const std::string bytes = m.SerializeAsString();
  REQUIRE(bytes.size() > 20000000);
  const Read r = ReadModule(bytes);
  REQUIRE(r.status.ok());
  CHECK(r.nodes == 2002);
  CHECK(r.peak < 8000000);  // the kept fields (~60 kB) parsed and featurized: ~2.6 MB
  CHECK(r.reserved >= r.peak);
  // And the kept fields are exactly the declared ones.
  auto kept = tgraph::hlo::ParseModule(bytes, "m");
  REQUIRE(kept.ok());
  CHECK(kept->SerializeAsString() == parsed->SerializeAsString());
}

TEST_CASE("a refused reservation stops a read before its memory is taken", "[hlo][memory]") {
  const std::string text = ChainText(50000);  // about 60 MB to read
  for (const std::string& bytes : {text, AsProto(text)}) {
    const Read r = ReadModule(bytes, /*budget=*/int64_t{8} << 20);
    CHECK(r.status.code() == absl::StatusCode::kResourceExhausted);
    CHECK(r.status.message().find("working memory") != std::string::npos);
    CHECK(r.status.message().find("over the test's budget") != std::string::npos);
    CHECK(r.peak <= (int64_t{8} << 20) + (int64_t{2} << 20));  // the budget and one charging step
  }
}

TEST_CASE("a module over the instruction limit is refused before its instructions are built", "[hlo][memory]") {
  const std::string text = ChainText(50000);
  const Read t = ReadModule(text, INT64_MAX, /*max_instructions=*/1000);
  CHECK(t.status.code() == absl::StatusCode::kResourceExhausted);
  CHECK(t.status.message() == "m: line 1003: the module has more than 1000 instructions, the limit");
  CHECK(t.peak < 4000000);
  const Read p = ReadModule(AsProto(text), INT64_MAX, 1000);
  CHECK(p.status.code() == absl::StatusCode::kResourceExhausted);
  CHECK(p.status.message() == "m: the module has 50002 instructions, over the limit of 1000");
  CHECK(p.peak < 1000000);
}

TEST_CASE("the wire scan reads what protobuf reads and refuses what it refuses", "[hlo][memory]") {
  tgraph::xla::HloInstructionProto inst;
  inst.set_name("a");
  inst.add_operand_ids(1);
  inst.add_operand_ids(300);
  const std::string packed = inst.SerializeAsString();
  // The same operand ids unpacked (two varint fields of number 36).
  std::string unpacked = packed.substr(0, 3);  // name: tag 0x0a, length 1, 'a'
  unpacked += std::string("\xa0\x02\x01", 3) + std::string("\xa0\x02\xac\x02", 4);
  for (const std::string& bytes : {packed, unpacked}) {
    const auto scan = tgraph::hlo::ScanWire(bytes, tgraph::xla::HloInstructionProto::descriptor());
    REQUIRE(scan.has_value());
    CHECK(scan->instructions == 1);
    tgraph::xla::HloInstructionProto back;
    REQUIRE(back.ParseFromString(tgraph::hlo::KeepDeclaredFields(bytes, tgraph::xla::HloInstructionProto::descriptor())));
    CHECK(back.name() == "a");
    CHECK(back.operand_ids_size() == 2);
    CHECK(back.operand_ids(1) == 300);
  }
  // A length past the end, a truncated varint, a group, a field number 0: not messages.
  for (const std::string& bad : {std::string("\x0a\x05" "ab", 4), std::string("\x08\xff", 2), std::string("\x0b", 1),
                                 std::string("\x00\x01", 2)})
    CHECK_FALSE(tgraph::hlo::ScanWire(bad, tgraph::xla::HloInstructionProto::descriptor()).has_value());
  // Nested deeper than protobuf reads: 200 tuple shapes inside one another.
  tgraph::xla::ShapeProto deep;
  tgraph::xla::ShapeProto* s = &deep;
  for (int i = 0; i < 200; ++i) s = s->add_tuple_shapes();
  CHECK_FALSE(tgraph::hlo::ScanWire(deep.SerializeAsString(), tgraph::xla::ShapeProto::descriptor()).has_value());
}
