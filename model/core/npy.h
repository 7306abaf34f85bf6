// NumPy .npy arrays and .npz archives (a zip of .npy members), read and written.
// Owns the byte-level format only; typed graph loaders live in graph_io.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tgraph {

enum class DType { kFloat32, kFloat64, kInt32, kInt64, kUint8, kInt8 };

// NumPy descr string ("<f4", "|u1", ...) and element size in bytes.
const char* DTypeDescr(DType t);
size_t DTypeSize(DType t);
const char* DTypeName(DType t);  // "float32", ...

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kUint8; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::kInt8; };

// A dense, little-endian array. The bytes are owned and always in C (row-major) order,
// whatever the order on disk: `fortran_order` records the order the array was read in
// and selects the order it is written in (real TpuGraphs files store edge_index in
// Fortran order; ParseNpy/ReadNpz transpose such arrays, SerializeNpy transposes back).
struct NpyArray {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  bool fortran_order = false;

  int64_t numel() const;
  std::string ShapeString() const;  // "(3, 140)"

  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }

  // Builds an array from typed values; values.size() must equal the product of shape.
  template <typename T>
  static NpyArray From(std::vector<int64_t> shape, const std::vector<T>& values) {
    NpyArray a;
    a.dtype = DTypeOf<T>::value;
    a.shape = std::move(shape);
    a.bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(a.bytes.data(), values.data(), a.bytes.size());
    return a;
  }
};

using NpzArchive = std::map<std::string, NpyArray>;

// Parses the .npy header (magic, version 1/2/3, dict with descr/fortran_order/shape).
// Returns the header length in bytes (data starts there) and fills dtype, shape and
// fortran_order. Rejects big-endian, object and any unsupported dtype.
absl::StatusOr<size_t> ParseNpyHeader(absl::string_view bytes, NpyArray* out);

// Parses a whole .npy member. `what` names it in errors ("file.npz:node_feat").
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view what);
// Writes the array in its `fortran_order`.
std::string SerializeNpy(const NpyArray& array);
// The .npy header alone (magic, version 1.0, dict padded to 64 bytes): SerializeNpy's
// first bytes.
std::string NpyHeader(const NpyArray& array);

// Reorders `bytes` (elements of `elem_size` bytes, logical shape `shape`) between C and
// Fortran order: to_fortran=true turns C-ordered bytes into Fortran-ordered ones, false
// the reverse. Arrays of rank 0 or 1 are the same in both orders.
std::vector<uint8_t> ReorderElements(const std::vector<uint8_t>& bytes, const std::vector<int64_t>& shape,
                                     size_t elem_size, bool to_fortran);

// One member to read narrowed to int8 as it is read, in pieces, so that its float32
// values are never all in memory (a layout file's node_config_feat can be 4 GB as
// float32 and is 1 GB as int8). Applies when the member is float32, in C order, and
// `wants` accepts its shape; otherwise the member is read as it is.
struct NpzNarrowing {
  std::string member;  // the key, without ".npy"
  std::function<bool(const std::vector<int64_t>& shape)> wants;
  // Converts n values, the first of which is element `first` of the member, into out;
  // an error ends the read with it.
  std::function<absl::Status(const float* values, size_t n, size_t first, const std::vector<int64_t>& shape,
                             int8_t* out)>
      convert;
};

// Reads every member of an .npz file. Errors name the file and the member.
absl::StatusOr<NpzArchive> ReadNpz(const std::string& path, const NpzNarrowing* narrow = nullptr);
// Each member's uncompressed size as the archive declares it (key without ".npy" ->
// bytes), from its directory alone: what reading it would take, before reading. Errors
// name the file.
absl::StatusOr<std::map<std::string, int64_t>> NpzMemberSizes(const std::string& path);
// Reads an .npz held in memory; `what` names it in errors.
absl::StatusOr<NpzArchive> ReadNpzFromBuffer(absl::string_view bytes, absl::string_view what);

// Writes an .npz (members "<key>.npy", deflated, fixed timestamps so that the same
// arrays always give byte-identical files). Written to a temporary file and renamed,
// so a reader never sees a half-written archive.
absl::Status WriteNpz(const std::string& path, const NpzArchive& arrays);

}  // namespace tgraph
