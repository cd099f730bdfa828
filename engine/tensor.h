// Tensor: a shape, a dtype, a device tag and contiguous shared storage.
//
// Storage is always contiguous row-major, in the tensor's dtype: f32, or bf16 stored as bf16 (2 bytes
// an element; engine/bf16.h). Arithmetic on bf16 widens to f32 (every reduction and GEMM accumulates
// in f32) and rounds once at the end. A slice along dim 0 (`slice0`) is a view sharing the
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

#include "engine/device.h"

namespace tpsp {

using Shape = std::vector<int64_t>;

/// Whether Tensor::empty fills with NaN: always without NDEBUG, else when the environment has
/// TPSP_POISON_EMPTY=1 (read once per process).
bool poison_empty_tensors();

/// "[2, 13, 24]" for error messages and reports.
std::string shape_str(const Shape& shape);
/// Product of the extents; 1 for a scalar shape [].
int64_t shape_numel(const Shape& shape);

/// A dense tensor (f32 or bf16) on the CPU or a device. Copying a Tensor copies the handle (shared
/// storage); use clone() for a deep copy. A device tensor's elements are never read or written from the
/// host: data(), at() and the host-side fills raise ShapeError for it; move it with to(Device::cpu).
class Tensor {
 public:
  /// An empty tensor (no storage, shape [0]).
  Tensor();
  /// A zero-filled tensor of the given shape. Throws ShapeError on a negative extent, or if the
  /// dtype/device has no storage in this process (f16; cuda without a registered GPU backend).
  explicit Tensor(Shape shape, DType dtype = DType::f32, Device device = Device::cpu);

  /// Zero-filled tensor, same as the constructor.
  static Tensor zeros(const Shape& shape);
  /// A tensor whose elements are not initialised: for outputs every element of which is written
  /// before it is read (saves the zero fill and its page faults on fresh memory). The elements are
  /// NaN instead (poison_empty_tensors()) in builds without NDEBUG (Debug, the ASan+UBSan tests) and
  /// under TPSP_POISON_EMPTY=1 (set by ./check for every rank), so a read before the write — e.g. of
  /// an async collective's output before its wait() — shows up in every result instead of reading
  /// stale memory that may hold a right answer. Same errors as the constructor.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
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

  /// The f32 elements. Throws ShapeError for another dtype (use to(DType::f32) or data_bf16()) and for
  /// a device tensor (host code cannot read device memory: use to(Device::cpu), or raw_data()).
  float* data();
  const float* data() const;
  /// The bf16 elements (raw bits, engine/bf16.h). Throws ShapeError for another dtype or a device tensor.
  uint16_t* data_bf16();
  const uint16_t* data_bf16() const;
  /// The bytes of the elements, whatever the dtype (nullptr without storage); a device pointer for a
  /// device tensor (for kernels and transports, never to be dereferenced on the host).
  void* raw_data() { return storage_ ? storage_.get() + offset_ * elem_size() : nullptr; }
  const void* raw_data() const { return storage_ ? storage_.get() + offset_ * elem_size() : nullptr; }
  /// Element at a flat row-major index (bounds-checked); the writable form is f32 only, the read
  /// form converts bf16 to float.
  float& at(int64_t flat);
  float at(int64_t flat) const;
  /// Element at a flat row-major index as a float, whatever the dtype (bounds-checked).
  float value(int64_t flat) const { return at(flat); }
  /// Element at a multi-index (bounds-checked), e.g. t.at({i, j, k}); same dtype rules as at(flat).
  float& at(std::initializer_list<int64_t> idx);
  float at(std::initializer_list<int64_t> idx) const;

  /// View of rows [begin, end) along dim 0, sharing storage. Throws ShapeError on a bad range.
  Tensor slice0(int64_t begin, int64_t end) const;
  /// View with a new shape of the same numel, sharing storage. Throws ShapeError if numel differs.
  Tensor reshape(const Shape& shape) const;
  /// Deep copy, on the same device.
  Tensor clone() const;
  /// This tensor in `dtype`: the same handle when it already is, else a converted copy (f32 → bf16
  /// rounds to nearest even; bf16 → f32 is exact). On the tensor's own device.
  Tensor to(DType dtype) const;
  /// This tensor on `device`: the same handle when it already is there, else a copy (same dtype and
  /// shape). ShapeError when `device` has no storage in this process (require_device_hooks).
  Tensor to(Device device) const;
  /// Copy of elements [start, start+length) along dimension d (any d). For d == 0 prefer slice0.
  Tensor narrow_copy(int64_t d, int64_t start, int64_t length) const;
  /// True if both tensors use the same storage block.
  bool shares_storage_with(const Tensor& other) const { return storage_ == other.storage_; }

  /// Fill every element with value (rounded for bf16), on the tensor's device.
  void fill(float value);
  /// Copy the elements of src (same shape) into this tensor, converting the dtype if they differ and
  /// moving them across devices if the devices differ. Throws ShapeError on a shape mismatch.
  void copy_from(const Tensor& src);

 private:
  Tensor(Shape shape, DType dtype, Device device, bool zero);
  std::size_t elem_size() const { return dtype_size(dtype_); }
  std::shared_ptr<unsigned char[]> storage_;
  int64_t offset_ = 0;
  int64_t numel_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
};

/// Concatenate tensors along dimension d; all other extents, the dtype and the device must match
/// (ShapeError names them). The result is on the parts' device.
Tensor cat(const std::vector<Tensor>& parts, int64_t d);

/// Throws ShapeError "<what>: expected shape [..] but got [..]" unless t has exactly `expected`.
void check_shape(const Tensor& t, const Shape& expected, const char* what);
/// Throws ShapeError "<what>: shapes [..] and [..] differ" unless a and b have the same shape.
void check_same_shape(const Tensor& a, const Tensor& b, const char* what);

}  // namespace tpsp
