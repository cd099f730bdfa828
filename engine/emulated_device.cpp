// The emulated device (emulated_device.h): host-memory storage hooks, and DeviceOps that wrap the
// CPU's (ops::cpu_ops()) with copies of each op's tensors to the host and its results back.
#include "engine/emulated_device.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/bf16.h"
#include "engine/device_hooks.h"
#include "engine/error.h"
#include "engine/ops/device_ops.h"
#include "engine/ops/ops.h"

namespace tpsp::emulated {
namespace {

std::atomic<bool> g_registered{false};

// Device pointers are host addresses with bit 62 set: not canonical on x86-64 (nor valid on AArch64),
// so host code that dereferences one (a loop over raw_data() of a device tensor) faults, as it would
// on a GPU, instead of reading the bytes (attack12). Pointer arithmetic keeps the tag; only these
// hooks and the emulated transport (untag()) turn it back into the host address.
constexpr uintptr_t kTag = uintptr_t{1} << 62;
void* tagged(void* p) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) | kTag);
}
void* host_of(const void* p) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) & ~kTag);
}

void* alloc(std::size_t bytes) {
  void* p = std::malloc(bytes);
  if (!p) throw std::bad_alloc();
  return tagged(p);
}
void release(void* p) noexcept {
  std::free(host_of(p));
}
void copy(void* dst, bool, const void* src, bool, std::size_t bytes) {
  std::memmove(host_of(dst), host_of(src), bytes);
}
void copy_2d(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
             std::size_t height) {
  char* d = static_cast<char*>(host_of(dst));
  const char* s = static_cast<const char*>(host_of(src));
  for (std::size_t r = 0; r < height; ++r) std::memcpy(d + r * dpitch, s + r * spitch, width);
}
void fill(void* dst_tagged, DType dt, float value, std::size_t n) {
  void* dst = host_of(dst_tagged);
  if (dt == DType::f32) {
    float* f = static_cast<float*>(dst);
    for (std::size_t i = 0; i < n; ++i) f[i] = value;
    return;
  }
  const uint16_t bits = f32_to_bf16(value);
  uint16_t* h = static_cast<uint16_t*>(dst);
  for (std::size_t i = 0; i < n; ++i) h[i] = bits;
}
void convert(void* dst_tagged, DType dst_dt, const void* src_tagged, DType src_dt, std::size_t n) {
  void* dst = host_of(dst_tagged);
  const void* src = host_of(src_tagged);
  TPSP_CHECK(dst_dt != src_dt && (dst_dt == DType::f32 || dst_dt == DType::bf16) &&
                 (src_dt == DType::f32 || src_dt == DType::bf16),
             "emulated device: convert between f32 and bf16 only");
  for (std::size_t i = 0; i < n; ++i) {
    if (dst_dt == DType::bf16)
      static_cast<uint16_t*>(dst)[i] = f32_to_bf16(static_cast<const float*>(src)[i]);
    else
      static_cast<float*>(dst)[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
  }
}

// The device's clock: the host's (the emulated device computes when the host calls it), through the
// marker hooks, so that the recorder's device-span path runs as it does on a GPU.
std::atomic<long> g_markers{0};
void* event_record() {
  ++g_markers;
  return new std::chrono::steady_clock::time_point(std::chrono::steady_clock::now());
}
double event_elapsed_s(void* a, void* b) {
  return std::chrono::duration<double>(*static_cast<std::chrono::steady_clock::time_point*>(b) -
                                       *static_cast<std::chrono::steady_clock::time_point*>(a))
      .count();
}
void event_release(void* e) noexcept {
  delete static_cast<std::chrono::steady_clock::time_point*>(e);
}

/// A device tensor's f32 copy on the CPU; every other argument passes as it is.
Tensor host(const Tensor& t) {
  return t.defined() ? t.to(Device::cpu).to(DType::f32) : t;
}
ops::AttentionOptions host(const ops::AttentionOptions& opt) {
  ops::AttentionOptions o = opt;
  o.key_padding_mask = host(opt.key_padding_mask);
  return o;
}
template <class T>
const T& host(const T& arg) {
  return arg;
}

/// A CPU result on the device (each tensor of a result struct).
Tensor dev(const Tensor& t) {
  return t.defined() ? t.to(Device::cuda) : t;
}
ops::MatmulGrads dev(const ops::MatmulGrads& g) {
  return {dev(g.dx), dev(g.dw)};
}
ops::LayerNormOut dev(const ops::LayerNormOut& o) {
  return {dev(o.y), dev(o.mean), dev(o.rstd)};
}
ops::LayerNormGrads dev(const ops::LayerNormGrads& g) {
  return {dev(g.dx), dev(g.dgamma), dev(g.dbeta)};
}
ops::RMSNormOut dev(const ops::RMSNormOut& o) {
  return {dev(o.y), dev(o.rstd)};
}
ops::AttentionOut dev(const ops::AttentionOut& o) {
  return {dev(o.out), dev(o.probs)};
}
ops::CrossEntropyOut dev(ops::CrossEntropyOut o) {
  o.losses = dev(o.losses);
  return o;
}

/// Runs f on a CPU copy of the device tensor t and writes the copy back.
template <class F>
void in_place(Tensor& t, F&& f) {
  Tensor h = host(t);
  f(h);
  t.copy_from(h);
}

/// Every op: the CPU's ops (engine/ops/cpu, behind the same DeviceOps interface; not the public op,
/// so a device op is one compute span, as on a GPU) on host copies of the inputs, the results back on
/// the device. Values are the CPU's bit for bit.
class EmulatedOps final : public ops::DeviceOps {
 public:
  Tensor matmul_forward(const Tensor& x, const Tensor& w) override {
    return run(&DeviceOps::matmul_forward, x, w);
  }
  Tensor matmul_dgrad(const Tensor& dy, const Tensor& w) override {
    return run(&DeviceOps::matmul_dgrad, dy, w);
  }
  void matmul_wgrad(const Tensor& dy, const Tensor& x, Tensor& dw) override {
    in_place(dw, [&](Tensor& h) { cpu_.matmul_wgrad(host(dy), host(x), h); });
  }
  ops::MatmulGrads matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx,
                                   bool need_dw) override {
    return run(&DeviceOps::matmul_backward, dy, x, w, need_dx, need_dw);
  }
  void bias_add_forward(Tensor& y, const Tensor& b) override {
    in_place(y, [&](Tensor& h) { cpu_.bias_add_forward(h, host(b)); });
  }
  Tensor bias_add_backward(const Tensor& dy) override { return run(&DeviceOps::bias_add_backward, dy); }

  Tensor add(const Tensor& a, const Tensor& b) override { return run(&DeviceOps::add, a, b); }
  void add_(Tensor& a, const Tensor& b) override {
    in_place(a, [&](Tensor& h) { cpu_.add_(h, host(b)); });
  }
  void scale_(Tensor& a, float s) override {
    in_place(a, [&](Tensor& h) { cpu_.scale_(h, s); });
  }
  Tensor gelu_forward(const Tensor& x) override { return run(&DeviceOps::gelu_forward, x); }
  Tensor gelu_backward(const Tensor& dy, const Tensor& x) override {
    return run(&DeviceOps::gelu_backward, dy, x);
  }

  ops::LayerNormOut layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      float eps) override {
    return run(&DeviceOps::layernorm_forward, x, gamma, beta, eps);
  }
  ops::LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                         const Tensor& mean, const Tensor& rstd) override {
    return run(&DeviceOps::layernorm_backward, dy, x, gamma, mean, rstd);
  }
  ops::RMSNormOut rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps) override {
    return run(&DeviceOps::rmsnorm_forward, x, weight, eps);
  }
  Tensor rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                          Tensor& dweight) override {
    Tensor dx;
    in_place(dweight,
             [&](Tensor& h) { dx = cpu_.rmsnorm_backward(host(dy), host(x), host(weight), host(rstd), h); });
    return dev(dx);
  }

  Tensor swiglu_forward(const Tensor& x) override { return run(&DeviceOps::swiglu_forward, x); }
  Tensor swiglu_backward(const Tensor& dy, const Tensor& x) override {
    return run(&DeviceOps::swiglu_backward, dy, x);
  }
  Tensor rope_rotate(const Tensor& x, const std::vector<float>& cos, const std::vector<float>& sin,
                     int64_t d) override {
    return run(&DeviceOps::rope_rotate, x, cos, sin, d);
  }

  Tensor softmax_forward(const Tensor& x) override { return run(&DeviceOps::softmax_forward, x); }
  Tensor softmax_backward(const Tensor& dy, const Tensor& y) override {
    return run(&DeviceOps::softmax_backward, dy, y);
  }

  ops::AttentionOut attention_forward(const Tensor& qkv, const ops::AttentionOptions& opt) override {
    return run(&DeviceOps::attention_forward, qkv, opt);
  }
  Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                            const ops::AttentionOptions& opt) override {
    return run(&DeviceOps::attention_backward, dout, qkv, probs, opt);
  }

  Tensor embedding_forward(const TokenBatch& ids, const Tensor& wte, int64_t vocab_start) override {
    return run(&DeviceOps::embedding_forward, ids, wte, vocab_start);
  }
  Tensor embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local,
                            int64_t vocab_start) override {
    return run(&DeviceOps::embedding_backward, dout, ids, vocab_local, vocab_start);
  }
  void position_embedding_add(Tensor& x, const Tensor& wpe, int64_t seq_start) override {
    in_place(x, [&](Tensor& h) { cpu_.position_embedding_add(h, host(wpe), seq_start); });
  }
  Tensor position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start) override {
    return run(&DeviceOps::position_embedding_backward, dx, max_seq, seq_start);
  }

  ops::CrossEntropyOut cross_entropy_forward(const Tensor& logits, const std::vector<int64_t>& targets,
                                             float label_smoothing) override {
    return run(&DeviceOps::cross_entropy_forward, logits, targets, label_smoothing);
  }
  Tensor cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& targets, float dloss,
                                float label_smoothing) override {
    return run(&DeviceOps::cross_entropy_backward, logits, targets, dloss, label_smoothing);
  }

  Tensor dropout_forward(const Tensor& x, float p, const ops::DropoutKey& key) override {
    return run(&DeviceOps::dropout_forward, x, p, key);
  }
  Tensor dropout_backward(const Tensor& dy, float p, const ops::DropoutKey& key) override {
    return run(&DeviceOps::dropout_backward, dy, p, key);
  }

  void adamw_step(Tensor& param, const Tensor& grad, ops::AdamWState& state, int64_t t,
                  const ops::AdamWConfig& cfg) override {
    ops::AdamWState h{host(state.m), host(state.v)};  // defined: the dispatcher created them
    in_place(param, [&](Tensor& p) { cpu_.adamw_step(p, host(grad), h, t, cfg); });
    state.m.copy_from(h.m);
    state.v.copy_from(h.v);
  }

 private:
  ops::DeviceOps& cpu_ = ops::cpu_ops();

  /// The CPU's op on host copies of the arguments, its result on the device.
  template <class R, class... P, class... A>
  R run(R (ops::DeviceOps::*op)(P...), const A&... args) {
    return dev((cpu_.*op)(host(args)...));
  }
};

}  // namespace

void register_cuda() {
  static EmulatedOps ops_table;
  if (g_registered.load()) return;
  TPSP_CHECK(
      device_hooks(Device::cuda) == nullptr,
      "emulated device: this process already uses a real CUDA device; the emulated one cannot replace it");
  DeviceHooks h;
  h.alloc = alloc;
  h.free = release;
  h.copy = copy;
  h.copy_2d = copy_2d;
  h.fill = fill;
  h.convert = convert;
  h.event_record = event_record;
  h.event_elapsed_s = event_elapsed_s;
  h.event_release = event_release;
  register_device_hooks(Device::cuda, h);
  ops::register_device_ops(Device::cuda, &ops_table);
  g_registered.store(true);
}

bool is_registered() {
  return g_registered.load();
}

void* untag(const void* p) {
  return host_of(p);
}

long markers_recorded() {
  return g_markers.load();
}

}  // namespace tpsp::emulated
