// Tensor: a shape, a dtype, a device tag and contiguous shared storage.
//
// Storage is always contiguous row-major. A slice along dim 0 (`slice0`) is a view sharing the
// storage, which is what sequence-first [s, b, h] layouts rely on: a sequence shard [s/tp, b, h]
// of an [s, b, h] tensor is a contiguous block, so splits, all-gathers and reduce-scatters along
// dim 0 need no copies (Megatron-LM mappings.py _split_along_first_dim).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace tpsp {

/// Element type. Only f32 has CPU storage today; bf16/f16 are named for the GPU backend.
enum class DType { f32, bf16, f16 };

/// Where the storage lives. CPU only today; cuda is named for the GPU backend.
enum class Device { cpu, cuda };

/// Name of a dtype ("f32", "bf16", "f16").
const char* dtype_name(DType dt);
/// Size of one element in bytes (4 for f32, 2 for bf16/f16).
std::size_t dtype_size(DType dt);

using Shape = std::vector<int64_t>;

/// "[2, 13, 24]" for error messages and reports.
std::string shape_str(const Shape& shape);
/// Product of the extents; 1 for a scalar shape [].
int64_t shape_numel(const Shape& shape);

/// A dense float32 tensor on the CPU. Copying a Tensor copies the handle (shared storage);
/// use clone() for a deep copy.
class Tensor {
 public:
  /// An empty tensor (no storage, shape [0]).
  Tensor();
  /// A zero-filled tensor of the given shape. Throws ShapeError on a negative extent,
  /// or if the dtype/device has no CPU storage yet (bf16, f16, cuda).
  explicit Tensor(Shape shape, DType dtype = DType::f32, Device device = Device::cpu);

  /// Zero-filled tensor, same as the constructor.
  static Tensor zeros(const Shape& shape);
  /// Tensor filled with `value`.
  static Tensor full(const Shape& shape, float value);
  /// Tensor holding `values` (row-major). Throws ShapeError if values.size() != numel(shape).
  static Tensor from(const Shape& shape, const std::vector<float>& values);

  const Shape& shape() const { return shape_; }
  /// Number of dimensions.
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  /// Extent of dimension d (negative d counts from the end). Throws ShapeError if out of range.
  int64_t size(int64_t d) const;
  int64_t numel() const { return numel_; }
  /// Bytes of the elements (numel * dtype size).
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool defined() const { return storage_ != nullptr; }

  float* data() { return storage_ ? storage_.get() + offset_ : nullptr; }
  const float* data() const { return storage_ ? storage_.get() + offset_ : nullptr; }
  /// Element at a flat row-major index (bounds-checked).
  float& at(int64_t flat);
  float at(int64_t flat) const;
  /// Element at a multi-index (bounds-checked), e.g. t.at({i, j, k}).
  float& at(std::initializer_list<int64_t> idx);
  float at(std::initializer_list<int64_t> idx) const;

  /// View of rows [begin, end) along dim 0, sharing storage. Throws ShapeError on a bad range.
  Tensor slice0(int64_t begin, int64_t end) const;
  /// View with a new shape of the same numel, sharing storage. Throws ShapeError if numel differs.
  Tensor reshape(const Shape& shape) const;
  /// Deep copy.
  Tensor clone() const;
  /// Copy of elements [start, start+length) along dimension d (any d). For d == 0 prefer slice0.
  Tensor narrow_copy(int64_t d, int64_t start, int64_t length) const;
  /// True if both tensors use the same storage block.
  bool shares_storage_with(const Tensor& other) const { return storage_ == other.storage_; }

  /// Fill every element with value.
  void fill(float value);
  /// Copy the elements of src (same shape) into this tensor. Throws ShapeError on a shape mismatch.
  void copy_from(const Tensor& src);

 private:
  std::shared_ptr<float[]> storage_;
  int64_t offset_ = 0;
  int64_t numel_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
};

/// Concatenate tensors along dimension d; all other extents must match (ShapeError names them).
Tensor cat(const std::vector<Tensor>& parts, int64_t d);

/// Throws ShapeError "<what>: expected shape [..] but got [..]" unless t has exactly `expected`.
void check_shape(const Tensor& t, const Shape& expected, const char* what);
/// Throws ShapeError "<what>: shapes [..] and [..] differ" unless a and b have the same shape.
void check_same_shape(const Tensor& a, const Tensor& b, const char* what);

}  // namespace tpsp
