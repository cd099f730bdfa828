#include "engine/tensor.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "engine/bf16.h"
#include "engine/device_hooks.h"
#include "engine/error.h"

namespace tpsp {

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

namespace {

/// Copies `height` rows of `width` bytes from src (rows spitch bytes apart) to dst (dpitch apart),
/// both on `device`: memcpy per row on the CPU, the device's 2-D copy elsewhere.
void copy_rows(Device device, unsigned char* dst, std::size_t dpitch, const unsigned char* src,
               std::size_t spitch, std::size_t width, std::size_t height) {
  if (width == 0 || height == 0) return;
  if (device != Device::cpu) {
    require_device_hooks(device, "copy").copy_2d(dst, dpitch, src, spitch, width, height);
    return;
  }
  for (std::size_t o = 0; o < height; ++o) std::memcpy(dst + o * dpitch, src + o * spitch, width);
}

/// glibc's malloc gives a block above its mmap threshold (128 KiB at first, raised as such blocks are
/// freed) its own mapping and unmaps it when it is freed, and trims the heap's top past 2× that: a
/// training step that frees and reallocates its activations and gradients every step then takes
/// thousands of page faults (and the kernel's zeroing of every page) per step. Once per process, before
/// the first tensor, this keeps blocks up to 32 MiB (glibc's largest threshold on 64-bit) in the heap
/// and freed memory in the process (trim above 1 GiB), as a caching allocator would: the process
/// keeps its peak. Left to glibc when GLIBC_TUNABLES is set (the user's own malloc settings), and
/// elsewhere than glibc.
void keep_freed_memory() {
#if defined(__GLIBC__)
  static const bool done = [] {
    if (std::getenv("GLIBC_TUNABLES") != nullptr) return false;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)done;
#endif
}

}  // namespace

Tensor::Tensor() : shape_{0} {}

Tensor::Tensor(Shape shape, DType dtype, Device device) : Tensor(std::move(shape), dtype, device, true) {}

Tensor::Tensor(Shape shape, DType dtype, Device device, bool zero)
    : shape_(std::move(shape)), dtype_(dtype), device_(device) {
  for (int64_t e : shape_) TPSP_CHECK(e >= 0, "negative extent in shape ", shape_str(shape_));
  TPSP_CHECK(dtype != DType::f16, "tensor storage for dtype ", dtype_name(dtype), " on ", device_name(device),
             " is not available in this build (f32 and bf16)");
  numel_ = shape_numel(shape_);
  const std::size_t bytes = static_cast<std::size_t>(std::max<int64_t>(numel_, 1)) * dtype_size(dtype);
  if (device != Device::cpu) {
    const DeviceHooks& hooks = require_device_hooks(device, "Tensor");
    auto* block = static_cast<unsigned char*>(hooks.alloc(bytes));
    storage_ = std::shared_ptr<unsigned char[]>(block, [free = hooks.free](unsigned char* q) { free(q); });
    if (zero && numel_ > 0) hooks.fill(block, dtype, 0.f, static_cast<std::size_t>(numel_));
    return;
  }
  keep_freed_memory();
  storage_ = std::shared_ptr<unsigned char[]>(zero ? new unsigned char[bytes]() : new unsigned char[bytes]);
}

bool poison_empty_tensors() {
#ifndef NDEBUG
  return true;
#else
  static const bool on = [] {
    const char* v = std::getenv("TPSP_POISON_EMPTY");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
#endif
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Tensor t(shape, dtype, device, false);
  if (poison_empty_tensors()) t.fill(std::numeric_limits<float>::quiet_NaN());
  return t;
}

namespace {
/// ShapeError unless the tensor is on the CPU: host code never dereferences device memory.
void check_host_access(Device device, const Shape& shape, const char* what) {
  TPSP_CHECK(
      device == Device::cpu, what, ": the tensor ", shape_str(shape), " is on ", device_name(device),
      "; its elements cannot be read or written from the host (compute with the ops, which run on their "
      "inputs' device; to(Device::cpu) copies it to the host, at the cost of a transfer)");
}
}  // namespace

float* Tensor::data() {
  if (!storage_) return nullptr;
  check_host_access(device_, shape_, "data()");
  TPSP_CHECK(dtype_ == DType::f32, "data(): the tensor ", shape_str(shape_), " is ", dtype_name(dtype_),
             ", not f32 (use to(DType::f32) or data_bf16())");
  return reinterpret_cast<float*>(storage_.get()) + offset_;
}

const float* Tensor::data() const {
  return const_cast<Tensor*>(this)->data();
}

uint16_t* Tensor::data_bf16() {
  if (!storage_) return nullptr;
  check_host_access(device_, shape_, "data_bf16()");
  TPSP_CHECK(dtype_ == DType::bf16, "data_bf16(): the tensor ", shape_str(shape_), " is ", dtype_name(dtype_),
             ", not bf16");
  return reinterpret_cast<uint16_t*>(storage_.get()) + offset_;
}

const uint16_t* Tensor::data_bf16() const {
  return const_cast<Tensor*>(this)->data_bf16();
}

Tensor Tensor::zeros(const Shape& shape) {
  return Tensor(shape);
}

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t(shape);
  t.fill(value);
  return t;
}

Tensor Tensor::from(const Shape& shape, const std::vector<float>& values) {
  Tensor t(shape);
  TPSP_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "Tensor::from: shape ", shape_str(shape),
             " holds ", t.numel(), " elements but ", values.size(), " values were given");
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

int64_t Tensor::size(int64_t d) const {
  const int64_t nd = dim();
  const int64_t dd = d < 0 ? d + nd : d;
  TPSP_CHECK(dd >= 0 && dd < nd, "dimension ", d, " is out of range for a tensor of shape ",
             shape_str(shape_));
  return shape_[static_cast<std::size_t>(dd)];
}

float& Tensor::at(int64_t flat) {
  TPSP_CHECK(flat >= 0 && flat < numel_, "flat index ", flat, " is out of range for shape ",
             shape_str(shape_));
  return data()[flat];
}

float Tensor::at(int64_t flat) const {
  if (dtype_ == DType::bf16) {
    TPSP_CHECK(flat >= 0 && flat < numel_, "flat index ", flat, " is out of range for shape ",
               shape_str(shape_));
    return bf16_to_f32(data_bf16()[flat]);
  }
  return const_cast<Tensor*>(this)->at(flat);
}

namespace {
int64_t flat_index(const Shape& shape, std::initializer_list<int64_t> idx) {
  TPSP_CHECK(idx.size() == shape.size(), "index of ", idx.size(), " coordinates for a tensor of shape ",
             shape_str(shape));
  int64_t flat = 0;
  std::size_t d = 0;
  for (int64_t i : idx) {
    TPSP_CHECK(i >= 0 && i < shape[d], "index ", i, " is out of range [0, ", shape[d], ") in dim ", d,
               " of shape ", shape_str(shape));
    flat = flat * shape[d] + i;
    ++d;
  }
  return flat;
}
}  // namespace

float& Tensor::at(std::initializer_list<int64_t> idx) {
  return data()[flat_index(shape_, idx)];
}

float Tensor::at(std::initializer_list<int64_t> idx) const {
  return at(flat_index(shape_, idx));
}

Tensor Tensor::slice0(int64_t begin, int64_t end) const {
  TPSP_CHECK(dim() >= 1, "slice0 needs at least one dimension, got shape ", shape_str(shape_));
  TPSP_CHECK(0 <= begin && begin <= end && end <= shape_[0], "slice0 range [", begin, ", ", end,
             ") is outside [0, ", shape_[0], "] of shape ", shape_str(shape_));
  Tensor v = *this;
  const int64_t row = shape_[0] == 0 ? 0 : numel_ / shape_[0];
  v.offset_ = offset_ + begin * row;
  v.shape_[0] = end - begin;
  v.numel_ = row * (end - begin);
  return v;
}

Tensor Tensor::reshape(const Shape& shape) const {
  TPSP_CHECK(shape_numel(shape) == numel_, "cannot reshape ", shape_str(shape_), " (", numel_,
             " elements) to ", shape_str(shape), " (", shape_numel(shape), " elements)");
  Tensor v = *this;
  v.shape_ = shape;
  return v;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device_);
  if (!numel_) return t;
  if (device_ == Device::cpu)
    std::memcpy(t.raw_data(), raw_data(), nbytes());
  else
    require_device_hooks(device_, "clone").copy(t.raw_data(), true, raw_data(), true, nbytes());
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor t = empty(shape_, dtype, device_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::narrow_copy(int64_t d, int64_t start, int64_t length) const {
  const int64_t nd = dim();
  const int64_t dd = d < 0 ? d + nd : d;
  TPSP_CHECK(dd >= 0 && dd < nd, "narrow_copy: dimension ", d, " is out of range for shape ",
             shape_str(shape_));
  const int64_t extent = shape_[static_cast<std::size_t>(dd)];
  TPSP_CHECK(start >= 0 && length >= 0 && start + length <= extent, "narrow_copy: range [", start, ", ",
             start + length, ") is outside [0, ", extent, "] of dim ", dd, " of shape ", shape_str(shape_));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dd; ++i) outer *= shape_[static_cast<std::size_t>(i)];
  for (int64_t i = dd + 1; i < nd; ++i) inner *= shape_[static_cast<std::size_t>(i)];
  Shape out_shape = shape_;
  out_shape[static_cast<std::size_t>(dd)] = length;
  Tensor out = empty(out_shape, dtype_, device_);
  const std::size_t es = elem_size();
  const auto* in = static_cast<const unsigned char*>(raw_data());
  auto* dst = static_cast<unsigned char*>(out.raw_data());
  const std::size_t width = static_cast<std::size_t>(length * inner) * es;
  copy_rows(device_, dst, width, in + static_cast<std::size_t>(start * inner) * es,
            static_cast<std::size_t>(extent * inner) * es, width, static_cast<std::size_t>(outer));
  return out;
}

void Tensor::fill(float value) {
  if (device_ != Device::cpu) {
    if (numel_)
      require_device_hooks(device_, "fill").fill(raw_data(), dtype_, value, static_cast<std::size_t>(numel_));
    return;
  }
  if (dtype_ == DType::bf16) {
    std::fill(data_bf16(), data_bf16() + numel_, f32_to_bf16(value));
    return;
  }
  std::fill(data(), data() + numel_, value);
}

void Tensor::copy_from(const Tensor& src) {
  check_same_shape(*this, src, "copy_from");
  if (!numel_) return;
  if (src.device() != device_) {  // across devices: move the bytes, then convert on this device
    if (src.dtype() != dtype_) {
      copy_from(src.to(device_));
      return;
    }
    const Device dev = device_ != Device::cpu ? device_ : src.device();
    require_device_hooks(dev, "copy_from")
        .copy(raw_data(), device_ != Device::cpu, src.raw_data(), src.device() != Device::cpu, nbytes());
    return;
  }
  if (device_ != Device::cpu) {
    const DeviceHooks& hooks = require_device_hooks(device_, "copy_from");
    if (src.dtype() == dtype_)
      hooks.copy(raw_data(), true, src.raw_data(), true, nbytes());
    else
      hooks.convert(raw_data(), dtype_, src.raw_data(), src.dtype(), static_cast<std::size_t>(numel_));
    return;
  }
  if (src.dtype() == dtype_) {
    std::memmove(raw_data(), src.raw_data(), nbytes());
  } else if (dtype_ == DType::bf16 && src.dtype() == DType::f32) {
    const float* s = src.data();
    uint16_t* d = data_bf16();
    for (int64_t i = 0; i < numel_; ++i) d[i] = f32_to_bf16(s[i]);
  } else if (dtype_ == DType::f32 && src.dtype() == DType::bf16) {
    const uint16_t* s = src.data_bf16();
    float* d = data();
    for (int64_t i = 0; i < numel_; ++i) d[i] = bf16_to_f32(s[i]);
  } else {
    TPSP_CHECK(false, "copy_from: no conversion from ", dtype_name(src.dtype()), " to ", dtype_name(dtype_));
  }
}

Tensor cat(const std::vector<Tensor>& parts, int64_t d) {
  TPSP_CHECK(!parts.empty(), "cat needs at least one tensor");
  const Shape& first = parts[0].shape();
  const int64_t nd = static_cast<int64_t>(first.size());
  const int64_t dd = d < 0 ? d + nd : d;
  TPSP_CHECK(dd >= 0 && dd < nd, "cat: dimension ", d, " is out of range for shape ", shape_str(first));
  Shape out_shape = first;
  out_shape[static_cast<std::size_t>(dd)] = 0;
  for (const Tensor& p : parts) {
    TPSP_CHECK(p.dim() == nd, "cat: shapes ", shape_str(first), " and ", shape_str(p.shape()),
               " have different ranks");
    TPSP_CHECK(p.dtype() == parts[0].dtype(), "cat: dtypes ", dtype_name(parts[0].dtype()), " and ",
               dtype_name(p.dtype()), " differ");
    TPSP_CHECK(p.device() == parts[0].device(), "cat: devices ", device_name(parts[0].device()), " and ",
               device_name(p.device()), " differ");
    for (int64_t i = 0; i < nd; ++i)
      TPSP_CHECK(i == dd || p.shape()[static_cast<std::size_t>(i)] == first[static_cast<std::size_t>(i)],
                 "cat along dim ", dd, ": shapes ", shape_str(first), " and ", shape_str(p.shape()),
                 " differ in dim ", i);
    out_shape[static_cast<std::size_t>(dd)] += p.shape()[static_cast<std::size_t>(dd)];
  }
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dd; ++i) outer *= first[static_cast<std::size_t>(i)];
  for (int64_t i = dd + 1; i < nd; ++i) inner *= first[static_cast<std::size_t>(i)];
  Tensor out = Tensor::empty(out_shape, parts[0].dtype(), parts[0].device());
  const std::size_t es = dtype_size(out.dtype());
  const int64_t out_row = out_shape[static_cast<std::size_t>(dd)] * inner;
  auto* dst = static_cast<unsigned char*>(out.raw_data());
  int64_t col = 0;
  for (const Tensor& p : parts) {
    const int64_t w = p.shape()[static_cast<std::size_t>(dd)] * inner;
    const auto* src = static_cast<const unsigned char*>(p.raw_data());
    copy_rows(out.device(), dst + static_cast<std::size_t>(col) * es, static_cast<std::size_t>(out_row) * es,
              src, static_cast<std::size_t>(w) * es, static_cast<std::size_t>(w) * es,
              static_cast<std::size_t>(outer));
    col += w;
  }
  return out;
}

void check_shape(const Tensor& t, const Shape& expected, const char* what) {
  TPSP_CHECK(t.shape() == expected, what, ": expected shape ", shape_str(expected), " but got ",
             shape_str(t.shape()));
}

void check_same_shape(const Tensor& a, const Tensor& b, const char* what) {
  TPSP_CHECK(a.shape() == b.shape(), what, ": shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
             " differ");
}

}  // namespace tpsp
