#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "model/core/file_util.h"
#include "model/core/npy.h"
#include "tests/test_util.h"

using namespace tgraph;

TEST_CASE("npy serialize/parse round trip for every dtype", "[npy]") {
  NpzArchive arrays;
  arrays["f32"] = NpyArray::From<float>({2, 3}, {1.5f, -2.f, 0.f, 3.25f, 1e30f, -0.f});
  arrays["f64"] = NpyArray::From<double>({1}, {3.141592653589793});
  arrays["i32"] = NpyArray::From<int32_t>({3}, {-1, 0, 2147483647});
  arrays["i64"] = NpyArray::From<int64_t>({2, 1}, {-5, int64_t{1} << 40});
  arrays["u8"] = NpyArray::From<uint8_t>({4}, {0, 1, 128, 255});
  arrays["i8"] = NpyArray::From<int8_t>({2}, {-1, 5});
  arrays["empty"] = NpyArray::From<int64_t>({0, 2}, {});
  for (const auto& [key, a] : arrays) {
    std::string bytes = SerializeNpy(a);
    // numpy aligns the data to 64 bytes.
    CHECK((bytes.size() - a.bytes.size()) % 64 == 0);
    auto back = ParseNpy(bytes, key);
    REQUIRE(back.ok());
    CHECK(back->dtype == a.dtype);
    CHECK(back->shape == a.shape);
    CHECK(back->bytes == a.bytes);
  }
}

TEST_CASE("npy header text matches numpy's", "[npy]") {
  std::string bytes = SerializeNpy(NpyArray::From<float>({3, 140}, std::vector<float>(420, 0.f)));
  CHECK(bytes.substr(0, 6) == "\x93NUMPY");
  CHECK(bytes[6] == 1);
  CHECK(bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 140), }") == 10);
  std::string one = SerializeNpy(NpyArray::From<int64_t>({5}, std::vector<int64_t>(5, 0)));
  CHECK(one.find("'shape': (5,)") != std::string::npos);
}

namespace {
std::string Header(const std::string& dict);

// The elements of a C-ordered (2, 3) array [[1, 2, 3], [4, 5, 6]] written in Fortran
// order are 1, 4, 2, 5, 3, 6: the first index varies fastest.
template <typename T>
void CheckFortran2x3(const char* descr) {
  const std::vector<T> fortran = {1, 4, 2, 5, 3, 6};
  std::string bytes = Header(std::string("{'descr': '") + descr + "', 'fortran_order': True, 'shape': (2, 3), }");
  bytes.append(reinterpret_cast<const char*>(fortran.data()), fortran.size() * sizeof(T));
  auto a = ParseNpy(bytes, descr);
  REQUIRE(a.ok());
  CHECK(a->fortran_order);
  CHECK(a->shape == std::vector<int64_t>{2, 3});
  const std::vector<T> c(a->data<T>(), a->data<T>() + 6);
  CHECK(c == std::vector<T>{1, 2, 3, 4, 5, 6});
  // Written back in its order: the same bytes as numpy's.
  CHECK(SerializeNpy(*a) == bytes);
}
}  // namespace

TEST_CASE("npy reads Fortran-ordered arrays of every dtype into C order, and writes them back", "[npy]") {
  CheckFortran2x3<float>("<f4");
  CheckFortran2x3<double>("<f8");
  CheckFortran2x3<int32_t>("<i4");
  CheckFortran2x3<int64_t>("<i8");
  CheckFortran2x3<uint8_t>("|u1");
  CheckFortran2x3<int8_t>("|i1");
}

TEST_CASE("Fortran reordering of a 3-d array matches hand-computed positions", "[npy]") {
  // Shape (2, 3, 4): element (i, j, k) sits at 12i + 4j + k in C order and at
  // i + 2j + 6k in Fortran order.
  std::vector<uint8_t> c(24);
  for (int i = 0; i < 24; ++i) c[i] = static_cast<uint8_t>(i);
  const std::vector<uint8_t> f = ReorderElements(c, {2, 3, 4}, 1, /*to_fortran=*/true);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) CHECK(f[i + 2 * j + 6 * k] == 12 * i + 4 * j + k);
  CHECK(ReorderElements(f, {2, 3, 4}, 1, /*to_fortran=*/false) == c);
  // Rank 0 and 1, and empty arrays, are the same in both orders.
  CHECK(ReorderElements(c, {24}, 1, true) == c);
  CHECK(ReorderElements({}, {0, 2}, 8, true).empty());
}

namespace {
std::string Header(const std::string& dict) {
  std::string d = dict;
  size_t total = 10 + d.size() + 1;
  d.append((64 - total % 64) % 64, ' ');
  d.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(d.size() & 0xff));
  out.push_back(static_cast<char>(d.size() >> 8));
  return out + d;
}
}  // namespace

TEST_CASE("npy parser rejects what it cannot represent, with the reason", "[npy]") {
  auto msg = [](const std::string& bytes) {
    auto r = ParseNpy(bytes, "x.npz:k");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  CHECK_THAT(msg(Header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }") + std::string(4, '\0')),
             Catch::Contains("big-endian"));
  CHECK_THAT(msg(Header("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }") + std::string(8, '\0')),
             Catch::Contains("object"));
  CHECK_THAT(msg(Header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }") + std::string(8, '\0')),
             Catch::Contains("unsupported dtype '<c8'"));
  CHECK_THAT(msg(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }") + std::string(8, '\0')),
             Catch::Contains("needs 12 bytes, found 8"));
  CHECK_THAT(msg("garbage"), Catch::Contains("bad magic"));
  CHECK_THAT(msg(Header("{'descr': '<f4', 'shape': (1,), }") + std::string(4, '\0')), Catch::Contains("lacks"));
  CHECK_THAT(msg(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,2 }") + std::string(8, '\0')),
             Catch::Contains("malformed header"));
  CHECK_THAT(msg(std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 18)), Catch::Contains("truncated"));
  CHECK_THAT(msg(std::string("\x93NUMPY\x07\x00\x10\x00", 10)), Catch::Contains("version 7"));
  // Every error names the member it is about.
  CHECK_THAT(msg("garbage"), Catch::StartsWith("x.npz:k: "));
}

TEST_CASE("npz write/read round trip and byte-identical output", "[npz]") {
  TempDir dir;
  NpzArchive arrays;
  arrays["node_feat"] = NpyArray::From<float>({2, 2}, {1, 2, 3, 4});
  arrays["ids"] = NpyArray::From<int64_t>({3}, {7, 8, 9});
  const std::string a = dir.path() + "/a.npz", b = dir.path() + "/b.npz";
  REQUIRE(WriteNpz(a, arrays).ok());
  REQUIRE(WriteNpz(b, arrays).ok());
  CHECK(*ReadFile(a) == *ReadFile(b));
  auto back = ReadNpz(a);
  REQUIRE(back.ok());
  REQUIRE(back->size() == 2);
  CHECK(back->at("ids").bytes == arrays["ids"].bytes);
  CHECK(back->at("node_feat").shape == std::vector<int64_t>{2, 2});
  // No temporary file is left behind.
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  CHECK(files == 2);
}

TEST_CASE("npz reader turns truncated and corrupt files into errors", "[npz]") {
  TempDir dir;
  NpzArchive arrays;
  std::vector<float> v(5000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * 0.5f;
  arrays["node_feat"] = NpyArray::From<float>({1000, 5}, v);
  const std::string path = dir.path() + "/g.npz";
  REQUIRE(WriteNpz(path, arrays).ok());
  const std::string good = *ReadFile(path);

  SECTION("missing file is NOT_FOUND with the path") {
    auto r = ReadNpz(dir.path() + "/nope.npz");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kNotFound);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("nope.npz"));
  }
  SECTION("every truncation is an error, never a crash") {
    for (size_t len : {size_t{0}, size_t{10}, good.size() / 3, good.size() / 2, good.size() - 30, good.size() - 1}) {
      auto r = ReadNpzFromBuffer(absl::string_view(good).substr(0, len), "cut.npz");
      CHECK_FALSE(r.ok());
    }
  }
  SECTION("a flipped byte anywhere is detected (CRC, zlib or structure)") {
    for (size_t pos = 40; pos < good.size(); pos += good.size() / 25) {
      std::string bad = good;
      bad[pos] = static_cast<char>(bad[pos] ^ 0x5a);
      auto r = ReadNpzFromBuffer(bad, "bad.npz");
      INFO("flipped byte " << pos << " of " << good.size());
      REQUIRE_FALSE(r.ok());
      CHECK_THAT(std::string(r.status().message()), Catch::StartsWith("bad.npz"));
    }
  }
  SECTION("an empty archive is an error") {
    CHECK_FALSE(ReadNpzFromBuffer("", "empty.npz").ok());
  }
}

namespace {

// `zip` with every header's uncompressed size of its one member set to `size` (the
// local header's at 22, the central directory's at 24; both little-endian uint32).
std::string WithDeclaredSize(std::string zip, uint32_t size) {
  int patched = 0;
  for (const auto& [signature, offset] : {std::pair<std::string, size_t>{"PK\x03\x04", 22}, {"PK\x01\x02", 24}}) {
    const size_t at = zip.find(signature);
    REQUIRE(at != std::string::npos);
    for (int b = 0; b < 4; ++b) zip[at + offset + b] = static_cast<char>((size >> (8 * b)) & 0xff);
    ++patched;
  }
  CHECK(patched == 2);
  return zip;
}

}  // namespace

TEST_CASE("an npz member whose header declares more than its compressed bytes can hold is refused before any "
          "memory is taken", "[npz]") {
  TempDir dir;
  NpzArchive arrays;
  arrays["node_feat"] = NpyArray::From<float>({1000}, std::vector<float>(1000, 0.f));  // deflates to a few dozen bytes
  const std::string path = dir.path() + "/g.npz";
  REQUIRE(WriteNpz(path, arrays).ok());
  const std::string good = *ReadFile(path);
  REQUIRE(good.size() < 400);
  // 1.5 GB declared by a file of a few hundred bytes: refused naming both sizes, not
  // allocated (it once took 1.47 GB and then failed with "No error").
  const absl::StatusOr<NpzArchive> r = ReadNpzFromBuffer(WithDeclaredSize(good, 1500000000u), "bomb.npz");
  REQUIRE(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(r.status().message()),
             Catch::StartsWith("bomb.npz: member 'node_feat': corrupt: its zip header declares 1500000000 bytes, but its "));
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("compressed bytes (deflated) can hold at most"));
  // The same file as written reads, so the bound does not refuse real data.
  CHECK(ReadNpzFromBuffer(good, "g.npz").ok());
}

TEST_CASE("Writers replace only regular files: a link, a FIFO or a device is refused and left as it was", "[npy][files]") {
  TempDir dir;
  const std::string target = dir.path() + "/target.txt", link = dir.path() + "/link.txt", fifo = dir.path() + "/fifo";
  REQUIRE(WriteFileAtomic(target, "kept").ok());
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  NpzArchive arrays;
  arrays["x"] = NpyArray::From<int8_t>({1}, {1});
  for (const std::string& path : {link, fifo, std::string("/dev/null"), dir.path()}) {
    const absl::Status text = WriteFileAtomic(path, "new");
    CHECK(text.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(text.message()), Catch::Contains("not a regular file: refusing to replace it"));
    CHECK(WriteNpz(path, arrays).code() == absl::StatusCode::kFailedPrecondition);
  }
  CHECK_THAT(std::string(WriteFileAtomic(link, "new").message()), Catch::Contains("link.txt is a symbolic link"));
  CHECK_THAT(std::string(WriteFileAtomic(fifo, "new").message()), Catch::Contains("fifo is a FIFO"));
  CHECK_THAT(std::string(WriteFileAtomic("/dev/null", "new").message()), Catch::Contains("/dev/null is a character device"));
  CHECK(std::filesystem::is_symlink(link));
  CHECK(std::filesystem::is_fifo(fifo));
  CHECK(std::filesystem::is_character_file("/dev/null"));
  CHECK(*ReadFile(target) == "kept");
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.path().filename().string().find(".tmp.") == std::string::npos;
  CHECK(files == 3);  // no temporary left behind

  // A tool's --out: refused when it is not a regular file, and an existing one only with force.
  CHECK(CheckOutputFile(dir.path() + "/new.npz", "--out", false).ok());
  CHECK(CheckOutputFile(target, "--out", true).ok());
  const absl::Status exists = CheckOutputFile(target, "--out", false);
  CHECK(exists.code() == absl::StatusCode::kAlreadyExists);
  CHECK_THAT(std::string(exists.message()), Catch::Contains("--out " + target + " exists; pass --force to replace it"));
  const absl::Status device = CheckOutputFile("/dev/full", "--out", true);
  CHECK(device.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(device.message()), Catch::Contains("--out /dev/full is a character device"));
  CHECK(CheckOutputFile(link, "--nodes_tsv", true).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("an npz's member sizes are its arrays' bytes with their headers, read without reading the arrays",
          "[npy]") {
  TempDir dir;
  const std::string path = dir.path() + "/sizes.npz";
  NpzArchive arrays;
  arrays["rows"] = NpyArray::From<int8_t>({1000, 18}, std::vector<int8_t>(18000, 3));
  arrays["runtimes"] = NpyArray::From<int64_t>({1000}, std::vector<int64_t>(1000, 7));
  REQUIRE(WriteNpz(path, arrays).ok());
  absl::StatusOr<std::map<std::string, int64_t>> sizes = NpzMemberSizes(path);
  REQUIRE(sizes.ok());
  // Each member is its header (NpyHeader: a multiple of 64 bytes) and its data: 18,000
  // and 8,000 bytes.
  const int64_t rows_header = static_cast<int64_t>(NpyHeader(arrays["rows"]).size());
  const int64_t runtimes_header = static_cast<int64_t>(NpyHeader(arrays["runtimes"]).size());
  CHECK(rows_header % 64 == 0);
  CHECK(*sizes == std::map<std::string, int64_t>{{"rows", rows_header + 18000}, {"runtimes", runtimes_header + 8000}});
  std::ofstream(dir.path() + "/junk.npz") << "PK not a zip";
  absl::StatusOr<std::map<std::string, int64_t>> junk = NpzMemberSizes(dir.path() + "/junk.npz");
  REQUIRE_FALSE(junk.ok());
  CHECK_THAT(std::string(junk.status().message()), Catch::StartsWith(dir.path() + "/junk.npz: not a valid .npz"));
  CHECK(NpzMemberSizes(dir.path() + "/missing.npz").status().code() == absl::StatusCode::kNotFound);
}
