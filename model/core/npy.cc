#include <algorithm>
#include "model/core/npy.h"

#include "model/core/file_util.h"

#include <zip.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <mutex>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tgraph {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "tgraph assumes a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr int64_t kMaxElements = int64_t{1} << 40;

absl::Status Bad(absl::string_view what, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", msg));
}

// A tiny parser for the Python dict literal in a .npy header.
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view s) : s_(s) {}

  absl::Status Parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    Skip();
    if (!Eat('{')) return Err("expected '{'");
    while (true) {
      Skip();
      if (Eat('}')) break;
      std::string key;
      if (!String(&key)) return Err("expected a quoted key");
      Skip();
      if (!Eat(':')) return Err("expected ':' after key");
      Skip();
      if (key == "descr") {
        if (!String(descr)) return Err("'descr' must be a string (structured dtypes are not supported)");
        have_descr = true;
      } else if (key == "fortran_order") {
        if (Word("True")) *fortran = true;
        else if (Word("False")) *fortran = false;
        else return Err("'fortran_order' must be True or False");
        have_fortran = true;
      } else if (key == "shape") {
        if (!Eat('(')) return Err("'shape' must be a tuple");
        shape->clear();
        while (true) {
          Skip();
          if (Eat(')')) break;
          int64_t v = 0;
          if (!Int(&v)) return Err("'shape' entries must be non-negative integers");
          shape->push_back(v);
          Skip();
          if (Eat(',')) continue;
          Skip();
          if (Eat(')')) break;
          return Err("expected ',' or ')' in 'shape'");
        }
        have_shape = true;
      } else {
        return Err(absl::StrCat("unexpected key '", key, "'"));
      }
      Skip();
      if (Eat(',')) continue;
      Skip();
      if (Eat('}')) break;
      return Err("expected ',' or '}'");
    }
    if (!have_descr || !have_fortran || !have_shape)
      return Err("header lacks one of 'descr', 'fortran_order', 'shape'");
    return absl::OkStatus();
  }

 private:
  absl::Status Err(absl::string_view m) const {
    return absl::InvalidArgumentError(absl::StrCat("malformed header at offset ", pos_, ": ", m));
  }
  void Skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n')) ++pos_;
  }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) { ++pos_; return true; }
    return false;
  }
  bool Word(absl::string_view w) {
    if (s_.substr(pos_, w.size()) == w) { pos_ += w.size(); return true; }
    return false;
  }
  bool String(std::string* out) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
    char q = s_[pos_++];
    size_t end = s_.find(q, pos_);
    if (end == absl::string_view::npos) return false;
    *out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  bool Int(int64_t* out) {
    size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (v > (kMaxElements / 10)) return false;
      v = v * 10 + (s_[pos_++] - '0');
    }
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 long suffix
    *out = v;
    return pos_ > start;
  }

  absl::string_view s_;
  size_t pos_ = 0;
};

absl::StatusOr<DType> DTypeFromDescr(const std::string& d) {
  if (d.size() < 2) return absl::InvalidArgumentError(absl::StrCat("unsupported dtype '", d, "'"));
  const char order = d[0];
  const std::string kind = d.substr(1);
  if (order == '>')
    return absl::InvalidArgumentError(absl::StrCat("big-endian dtype '", d, "' is not supported"));
  if (kind == "O" || kind.rfind("O", 0) == 0)
    return absl::InvalidArgumentError("object arrays are not supported");
  if (order != '<' && order != '|' && order != '=')
    return absl::InvalidArgumentError(absl::StrCat("unsupported dtype '", d, "'"));
  if (kind == "f4") return DType::kFloat32;
  if (kind == "f8") return DType::kFloat64;
  if (kind == "i4") return DType::kInt32;
  if (kind == "i8") return DType::kInt64;
  if (kind == "u1") return DType::kUint8;
  if (kind == "i1") return DType::kInt8;
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported dtype '", d, "' (supported: float32, float64, int32, int64, uint8, int8)"));
}

}  // namespace

const char* DTypeDescr(DType t) {
  switch (t) {
    case DType::kFloat32: return "<f4";
    case DType::kFloat64: return "<f8";
    case DType::kInt32: return "<i4";
    case DType::kInt64: return "<i8";
    case DType::kUint8: return "|u1";
    case DType::kInt8: return "|i1";
  }
  return "?";
}

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kFloat64: case DType::kInt64: return 8;
    case DType::kUint8: case DType::kInt8: return 1;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUint8: return "uint8";
    case DType::kInt8: return "int8";
  }
  return "?";
}

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string NpyArray::ShapeString() const {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

absl::StatusOr<size_t> ParseNpyHeader(absl::string_view bytes, NpyArray* out) {
  if (bytes.size() < kMagicLen + 4 || bytes.substr(0, kMagicLen) != absl::string_view(kMagic, kMagicLen))
    return absl::InvalidArgumentError("not an .npy array (bad magic string)");
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, prefix = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return absl::InvalidArgumentError("truncated .npy preamble");
    header_len = 0;
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[8 + i]);
    prefix = 12;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unsupported .npy format version ", major));
  }
  if (bytes.size() < prefix + header_len)
    return absl::InvalidArgumentError(absl::StrCat("truncated .npy header: need ", prefix + header_len,
                                                   " bytes, have ", bytes.size()));
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  HeaderParser parser(bytes.substr(prefix, header_len));
  if (absl::Status s = parser.Parse(&descr, &fortran, &shape); !s.ok()) return s;
  absl::StatusOr<DType> dtype = DTypeFromDescr(descr);
  if (!dtype.ok()) return dtype.status();
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > kMaxElements / d)
      return absl::InvalidArgumentError("array shape is implausibly large");
    n *= d;
  }
  out->dtype = *dtype;
  out->shape = std::move(shape);
  out->fortran_order = fortran;
  return prefix + header_len;
}

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view what) {
  NpyArray a;
  absl::StatusOr<size_t> data_start = ParseNpyHeader(bytes, &a);
  if (!data_start.ok()) return Bad(what, data_start.status().message());
  const size_t want = static_cast<size_t>(a.numel()) * DTypeSize(a.dtype);
  const size_t have = bytes.size() - *data_start;
  if (have != want)
    return Bad(what, absl::StrCat("data size mismatch: shape ", a.ShapeString(), " of ", DTypeName(a.dtype),
                                  " needs ", want, " bytes, found ", have));
  a.bytes.assign(bytes.begin() + *data_start, bytes.end());
  if (a.fortran_order) a.bytes = ReorderElements(a.bytes, a.shape, DTypeSize(a.dtype), /*to_fortran=*/false);
  return a;
}

std::vector<uint8_t> ReorderElements(const std::vector<uint8_t>& bytes, const std::vector<int64_t>& shape,
                                     size_t elem_size, bool to_fortran) {
  const size_t rank = shape.size();
  if (rank < 2 || bytes.empty()) return bytes;
  // Walk the elements in C order with an odometer over the multi-index, keeping the
  // element's Fortran-order position up to date (Fortran strides: dimension 0 fastest).
  std::vector<int64_t> fstride(rank, 1), index(rank, 0);
  for (size_t d = 1; d < rank; ++d) fstride[d] = fstride[d - 1] * shape[d - 1];
  std::vector<uint8_t> out(bytes.size());
  const size_t count = bytes.size() / elem_size;
  int64_t f = 0;
  for (size_t c = 0; c < count; ++c) {
    const size_t from = to_fortran ? c : static_cast<size_t>(f), to = to_fortran ? static_cast<size_t>(f) : c;
    std::memcpy(out.data() + to * elem_size, bytes.data() + from * elem_size, elem_size);
    for (size_t d = rank; d-- > 0;) {  // advance the last (fastest in C) dimension first
      f += fstride[d];
      if (++index[d] < shape[d]) break;
      f -= fstride[d] * shape[d];
      index[d] = 0;
    }
  }
  return out;
}

std::string NpyHeader(const NpyArray& a) {
  std::string dict = absl::StrCat("{'descr': '", DTypeDescr(a.dtype), "', 'fortran_order': ",
                                  a.fortran_order ? "True" : "False", ", 'shape': ", a.ShapeString(), ", }");
  // Pad with spaces so that magic + len + dict + '\n' is a multiple of 64 (as numpy does).
  size_t total = kMagicLen + 2 + 2 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicLen);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>((dict.size() >> 8) & 0xff));
  out += dict;
  return out;
}

std::string SerializeNpy(const NpyArray& a) {
  std::string out = NpyHeader(a);
  if (a.fortran_order && a.shape.size() >= 2) {
    const std::vector<uint8_t> f = ReorderElements(a.bytes, a.shape, DTypeSize(a.dtype), /*to_fortran=*/true);
    out.append(reinterpret_cast<const char*>(f.data()), f.size());
  } else {
    out.append(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size());
  }
  return out;
}

namespace {

// libzip as Debian bookworm ships it (1.7.3) computes what zip_open_from_source needs
// of a source in function-local statics, unsynchronised: two threads opening their first
// archives at once can read a half-computed mask and refuse a new archive as read-only
// ("Read-only archive"; tgraph-synth with two threads failed so in about 3% of runs). Every
// open in this file takes this lock; reading and writing the archive afterwards do not.
std::mutex& ZipOpenMutex() {
  static std::mutex mu;
  return mu;
}

zip_t* OpenZip(const std::string& path, int flags, int* err) {
  std::lock_guard<std::mutex> lock(ZipOpenMutex());
  return zip_open(path.c_str(), flags, err);
}

zip_t* OpenZipFromSource(zip_source_t* src, int flags, zip_error_t* error) {
  std::lock_guard<std::mutex> lock(ZipOpenMutex());
  return zip_open_from_source(src, flags, error);
}

struct ZipCloser {
  void operator()(zip_t* z) const { if (z) zip_discard(z); }
};
struct ZipFileCloser {
  void operator()(zip_file_t* f) const { if (f) zip_fclose(f); }
};
using ZipPtr = std::unique_ptr<zip_t, ZipCloser>;
using ZipFilePtr = std::unique_ptr<zip_file_t, ZipFileCloser>;

std::string ZipErrorString(int code) {
  zip_error_t err;
  zip_error_init_with_code(&err, code);
  std::string s = zip_error_strerror(&err);
  zip_error_fini(&err);
  return s;
}

// Reads exactly n bytes from a zip member; false on short read or error.
// In reads of at most 1 GiB: libzip 1.7.3 (Debian bookworm) reports a read of more than
// 4 GiB from a deflated member as complete while its inflate stream has not produced
// it all (seen on a 4.35 GB node_config_feat: the bytes after "all" were still there).
bool ReadExactly(zip_file_t* f, void* dst, size_t n) {
  constexpr size_t kMaxRead = size_t{1} << 30;
  uint8_t* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    zip_int64_t r = zip_fread(f, p, std::min(n, kMaxRead));
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Whether a member's declared size is what its compressed bytes can hold: stored, the
// same; deflated, at most 1032 times (deflate's largest ratio) plus a block. A zip
// header's size is the writer's claim; memory is allocated only for what the data can
// be. True when it is so bounded (the data may then be allocated whole, at once); false
// for other methods, whose data is grown as it arrives.
absl::StatusOr<bool> CheckDeclaredSize(const zip_stat_t& st, absl::string_view member) {
  if (!(st.valid & ZIP_STAT_COMP_SIZE) || !(st.valid & ZIP_STAT_COMP_METHOD)) return false;
  uint64_t most = 0;
  if (st.comp_method == ZIP_CM_STORE) most = st.comp_size;
  else if (st.comp_method == ZIP_CM_DEFLATE)
    most = st.comp_size > (~uint64_t{0} - 1024) / 1032 ? ~uint64_t{0} : st.comp_size * 1032 + 1024;
  else return false;
  if (st.size > most)
    return Bad(member, absl::StrCat("corrupt: its zip header declares ", st.size, " bytes, but its ", st.comp_size,
                                    " compressed bytes (", st.comp_method == ZIP_CM_STORE ? "stored" : "deflated",
                                    ") can hold at most ", most));
  return true;
}

// Why a member's data could not be read: libzip's error, or that it ended early (libzip
// then has none to say: "No error").
std::string ReadFailure(zip_file_t* f) {
  if (zip_error_code_zip(zip_file_get_error(f)) != ZIP_ER_OK)
    return absl::StrCat("truncated or corrupt data: ", zip_file_strerror(f));
  return "truncated or corrupt data: the member ends before the size its header declares";
}

// Reads n bytes into *bytes: allocated at once when n is `bounded` (CheckDeclaredSize),
// else grown as the data arrives (a piece at a time), so that a member whose header
// claims more than its data holds costs only what it holds.
bool ReadData(zip_file_t* f, size_t n, bool bounded, std::vector<uint8_t>* bytes) {
  constexpr size_t kPiece = size_t{64} << 20;
  bytes->clear();
  if (bounded) {
    bytes->resize(n);
    return n == 0 || ReadExactly(f, bytes->data(), n);
  }
  for (size_t done = 0; done < n;) {
    const size_t count = std::min(kPiece, n - done);
    bytes->resize(done + count);
    if (!ReadExactly(f, bytes->data() + done, count)) return false;
    done += count;
  }
  return true;
}

// Reads a float32 member's `n` values in pieces, converting each piece to int8.
absl::Status ReadNarrowed(zip_file_t* f, const NpzNarrowing& narrow, bool bounded, absl::string_view member,
                          NpyArray* a) {
  constexpr size_t kPiece = size_t{1} << 22;  // values per piece: 16 MiB of float32
  const size_t n = static_cast<size_t>(a->numel());
  std::vector<float> piece(std::min(n, kPiece));
  a->bytes.clear();
  if (bounded) a->bytes.resize(n);
  for (size_t first = 0; first < n; first += kPiece) {
    const size_t count = std::min(kPiece, n - first);
    if (!ReadExactly(f, piece.data(), count * sizeof(float))) return Bad(member, ReadFailure(f));
    if (!bounded) a->bytes.resize(first + count);  // grown as the data arrives
    int8_t* out = reinterpret_cast<int8_t*>(a->bytes.data());
    if (absl::Status s = narrow.convert(piece.data(), count, first, a->shape, out + first); !s.ok()) return s;
  }
  a->dtype = DType::kInt8;
  return absl::OkStatus();
}

absl::StatusOr<NpzArchive> ReadArchive(zip_t* za, absl::string_view what, const NpzNarrowing* narrow) {
  NpzArchive out;
  const zip_int64_t count = zip_get_num_entries(za, 0);
  for (zip_int64_t i = 0; i < count; ++i) {
    zip_stat_t st;
    if (zip_stat_index(za, i, 0, &st) != 0)
      return Bad(what, absl::StrCat("cannot stat zip entry ", i, ": ", zip_strerror(za)));
    std::string name = st.name ? st.name : "";
    if (name.empty() || name.back() == '/') continue;
    std::string key = name;
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
    const std::string member = absl::StrCat(what, ": member '", key, "'");
    ZipFilePtr f(zip_fopen_index(za, i, 0));
    if (!f) return Bad(member, absl::StrCat("cannot open: ", zip_strerror(za)));
    const size_t size = static_cast<size_t>(st.size);
    const absl::StatusOr<bool> bounded = CheckDeclaredSize(st, member);
    if (!bounded.ok()) return bounded.status();
    // Preamble, then the header, then the data read straight into the array.
    std::string head(std::min<size_t>(size, 12), '\0');
    if (!ReadExactly(f.get(), head.data(), head.size()))
      return Bad(member, "truncated or corrupt (cannot read the .npy preamble)");
    NpyArray a;
    size_t header_total = 0;
    {
      // Determine the full header length from the preamble, then read the rest of it.
      if (head.size() < 10 || head.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
        return Bad(member, "not an .npy array (bad magic string)");
      const int major = static_cast<uint8_t>(head[6]);
      size_t hl = 0, prefix = 10;
      if (major == 1) {
        hl = static_cast<uint8_t>(head[8]) | (static_cast<uint8_t>(head[9]) << 8);
      } else {
        if (head.size() < 12) return Bad(member, "truncated .npy preamble");
        for (int b = 3; b >= 0; --b) hl = (hl << 8) | static_cast<uint8_t>(head[8 + b]);
        prefix = 12;
      }
      if (prefix + hl > size) return Bad(member, "truncated .npy header");
      const size_t already = head.size();
      head.resize(prefix + hl);
      if (prefix + hl > already && !ReadExactly(f.get(), head.data() + already, prefix + hl - already))
        return Bad(member, "truncated or corrupt .npy header");
      absl::StatusOr<size_t> hs = ParseNpyHeader(head, &a);
      if (!hs.ok()) return Bad(member, hs.status().message());
      header_total = *hs;
    }
    const size_t want = static_cast<size_t>(a.numel()) * DTypeSize(a.dtype);
    if (size - header_total != want)
      return Bad(member, absl::StrCat("data size mismatch: shape ", a.ShapeString(), " of ", DTypeName(a.dtype),
                                      " needs ", want, " bytes, the member holds ", size - header_total));
    if (narrow && key == narrow->member && a.dtype == DType::kFloat32 && !a.fortran_order && narrow->wants(a.shape)) {
      if (absl::Status s = ReadNarrowed(f.get(), *narrow, *bounded, member, &a); !s.ok()) return s;
    } else {
      if (!ReadData(f.get(), want, *bounded, &a.bytes))
        return Bad(member, ReadFailure(f.get()));
    }
    // Reading past the end triggers libzip's CRC check for the last block.
    uint8_t extra;
    const zip_int64_t tail = zip_fread(f.get(), &extra, 1);
    if (tail < 0) return Bad(member, absl::StrCat("corrupt data: ", zip_file_strerror(f.get())));
    if (tail > 0) return Bad(member, "corrupt data: the member is longer than its declared size");
    if (a.fortran_order) a.bytes = ReorderElements(a.bytes, a.shape, DTypeSize(a.dtype), /*to_fortran=*/false);
    out.emplace(std::move(key), std::move(a));
  }
  if (out.empty()) return Bad(what, "the archive holds no arrays");
  return out;
}

}  // namespace

absl::StatusOr<NpzArchive> ReadNpz(const std::string& path, const NpzNarrowing* narrow) {
  int err = 0;
  ZipPtr za(OpenZip(path, ZIP_RDONLY | ZIP_CHECKCONS, &err));
  if (!za) {
    if (err == ZIP_ER_NOENT || err == ZIP_ER_OPEN)
      return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", ZipErrorString(err)));
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid .npz (zip) file: ", ZipErrorString(err)));
  }
  return ReadArchive(za.get(), path, narrow);
}

absl::StatusOr<std::map<std::string, int64_t>> NpzMemberSizes(const std::string& path) {
  int err = 0;
  ZipPtr za(OpenZip(path, ZIP_RDONLY | ZIP_CHECKCONS, &err));
  if (!za) {
    if (err == ZIP_ER_NOENT || err == ZIP_ER_OPEN)
      return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", ZipErrorString(err)));
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid .npz (zip) file: ", ZipErrorString(err)));
  }
  std::map<std::string, int64_t> sizes;
  const zip_int64_t n = zip_get_num_entries(za.get(), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(za.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE))
      return absl::InvalidArgumentError(absl::StrCat(path, ": member ", i, " has no name or size in the archive"));
    std::string name = st.name;
    if (absl::EndsWith(name, ".npy")) name.resize(name.size() - 4);
    sizes[name] = static_cast<int64_t>(st.size);
  }
  return sizes;
}

absl::StatusOr<NpzArchive> ReadNpzFromBuffer(absl::string_view bytes, absl::string_view what) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
  if (!src) {
    std::string msg = zip_error_strerror(&error);
    zip_error_fini(&error);
    return Bad(what, msg);
  }
  ZipPtr za(OpenZipFromSource(src, ZIP_RDONLY | ZIP_CHECKCONS, &error));
  if (!za) {
    std::string msg = zip_error_strerror(&error);
    zip_source_free(src);
    zip_error_fini(&error);
    return Bad(what, absl::StrCat("not a valid .npz (zip) archive: ", msg));
  }
  zip_error_fini(&error);
  return ReadArchive(za.get(), what, nullptr);
}

absl::Status WriteNpz(const std::string& path, const NpzArchive& arrays) {
  for (const auto& [key, array] : arrays) {
    if (static_cast<size_t>(array.numel()) * DTypeSize(array.dtype) != array.bytes.size())
      return absl::InvalidArgumentError(absl::StrCat(path, ": array '", key, "' has ", array.bytes.size(),
                                                     " bytes but shape ", array.ShapeString()));
  }
  if (absl::Status s = ReplaceableFile(path); !s.ok()) return s;
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int err = 0;
  zip_t* za = OpenZip(tmp, ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!za) return absl::InternalError(absl::StrCat(tmp, ": cannot create: ", ZipErrorString(err)));
  // The serialized members must outlive zip_close, which is when libzip reads them.
  std::vector<std::string> payloads;
  payloads.reserve(arrays.size());
  auto fail = [&](absl::string_view step) {
    // A system error (a full disk, no permission) keeps its errno's status code.
    zip_error_t* ze = zip_get_error(za);
    const int sys = zip_error_system_type(ze) == ZIP_ET_SYS ? zip_error_code_system(ze) : 0;
    absl::Status s = sys != 0 ? ErrnoStatus(sys, absl::StrCat(path, ": ", step))
                              : absl::InternalError(absl::StrCat(path, ": ", step, ": ", zip_strerror(za)));
    zip_discard(za);
    std::remove(tmp.c_str());
    return s;
  };
  for (const auto& [key, array] : arrays) {
    // A C-order member is its header and the array's own bytes, not a copy of them (a
    // report's float configurations are 4 bytes per value); Fortran order is reordered.
    zip_source_t* src = nullptr;
    if (array.fortran_order && array.shape.size() >= 2) {
      payloads.push_back(SerializeNpy(array));
      src = zip_source_buffer(za, payloads.back().data(), payloads.back().size(), 0);
    } else {
      payloads.push_back(NpyHeader(array));
      const zip_buffer_fragment_t parts[2] = {
          {reinterpret_cast<zip_uint8_t*>(payloads.back().data()), payloads.back().size()},
          {const_cast<zip_uint8_t*>(array.bytes.data()), array.bytes.size()}};
      src = zip_source_buffer_fragment(za, parts, array.bytes.empty() ? 1 : 2, 0);
    }
    if (!src) return fail("zip_source_buffer");
    const std::string name = key + ".npy";
    zip_int64_t idx = zip_file_add(za, name.c_str(), src, ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(src);
      return fail("zip_file_add");
    }
    // 1980-01-01 00:00 in DOS format, like numpy.savez: reproducible bytes.
    if (zip_file_set_dostime(za, idx, 0, (0 << 9) | (1 << 5) | 1, 0) != 0) return fail("set time");
    if (zip_set_file_compression(za, idx, ZIP_CM_DEFLATE, 1) != 0) return fail("set compression");
  }
  if (zip_close(za) != 0) return fail("write");
  // Durable before it is visible: fsync the file, rename it, fsync the directory.
  if (absl::Status s = FsyncFile(tmp); !s.ok()) {
    std::remove(tmp.c_str());
    return s;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return ErrnoStatus(e, absl::StrCat(path, ": rename"));
  }
  return FsyncParentDir(path);
}

}  // namespace tgraph
