// The public entry points of every op (engine/ops/*.h), one path for every device: find the inputs'
// device, check the op's rule (engine/ops/rules.h: the same message on every device), widen bf16
// inputs to f32, run the device's ops (engine/ops/device_ops.h: the CPU's built in, a registered GPU
// or emulated device's), and give the result the inputs' precision: bf16 when every floating input
// is bf16, else f32. So every GEMM and every reduction accumulates in f32 and a bf16 result is
// rounded once (docs/tolerances.md, bf16). The GEMMs take bf16 operands as they are (cuBLAS with f32
// accumulation: the same products, no widened copy; CpuOps widens them for sgemm).
#include <atomic>
#include <initializer_list>

#include "engine/error.h"
#include "engine/ops/device_ops.h"
#include "engine/ops/ops.h"
#include "engine/ops/rules.h"
#include "engine/trace/span.h"

namespace tpsp::ops {

DeviceOps::~DeviceOps() = default;

namespace {

std::atomic<DeviceOps*> g_cuda_ops{nullptr};

/// The device of the op's defined tensors; ShapeError when they are on different devices.
Device device_of(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (!first) first = t;
    TPSP_CHECK(t->device() == first->device(), op, ": inputs on ", device_name(first->device()), " and ",
               device_name(t->device()), "; every tensor of an op must be on one device");
  }
  return first ? first->device() : Device::cpu;
}

/// The ops of `dev`; ShapeError naming the op and the rule when a device has none registered.
DeviceOps& ops_on(Device dev, const char* op) {
  DeviceOps* d = device_ops(dev);
  TPSP_CHECK(d != nullptr, op, ": a ", device_name(dev), " tensor, but no ", device_name(dev),
             " ops are registered in this process (a build without the GPU backend, or "
             "tpsp::cuda::register_backend() was not called)");
  return *d;
}

/// t widened to f32 (the same handle when it already is f32, or undefined).
Tensor f32(const Tensor& t) {
  return t.defined() ? t.to(DType::f32) : t;
}

/// bf16 when every defined input is bf16, else f32.
DType result_dtype(std::initializer_list<const Tensor*> ts) {
  bool any = false;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (t->dtype() != DType::bf16) return DType::f32;
    any = true;
  }
  return any ? DType::bf16 : DType::f32;
}

Tensor as(const Tensor& t, DType d) {
  return t.defined() ? t.to(d) : t;
}

/// Runs an in-place f32 op on t: directly when t is f32, else on a widened copy written back once.
template <class F>
void in_place(Tensor& t, F&& f) {
  if (t.dtype() == DType::f32) {
    f(t);
    return;
  }
  Tensor w = t.to(DType::f32);
  f(w);
  t.copy_from(w);
}

}  // namespace

void register_device_ops(Device device, DeviceOps* ops) {
  TPSP_CHECK(device != Device::cpu, "register_device_ops: the cpu ops are built in and cannot be replaced");
  g_cuda_ops.store(ops);
}

DeviceOps* device_ops(Device device) {
  return device == Device::cpu ? &cpu_ops() : g_cuda_ops.load();
}

Tensor matmul_forward(const Tensor& x, const Tensor& w) {
  const Device dev = device_of("matmul_forward", {&x, &w});
  rules::matmul_forward(x, w);
  trace::Span span("gemm", "forward", dev);
  return as(ops_on(dev, "matmul_forward").matmul_forward(x, w), result_dtype({&x, &w}));
}

Tensor matmul_dgrad(const Tensor& dy, const Tensor& w) {
  const Device dev = device_of("matmul_dgrad", {&dy, &w});
  rules::matmul_dgrad(dy, w);
  trace::Span span("gemm", "dgrad", dev);
  return as(ops_on(dev, "matmul_dgrad").matmul_dgrad(dy, w), result_dtype({&dy, &w}));
}

void matmul_wgrad(const Tensor& dy, const Tensor& x, Tensor& dw) {
  const Device dev = device_of("matmul_wgrad", {&dy, &x, &dw});
  rules::matmul_wgrad(dy, x, dw);
  trace::Span span("gemm", "wgrad", dev);
  ops_on(dev, "matmul_wgrad").matmul_wgrad(dy, x, dw);
}

MatmulGrads matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx, bool need_dw) {
  const Device dev = device_of("matmul_backward", {&dy, &x, &w});
  rules::matmul_backward(dy, x, w);
  trace::Span span("gemm", "backward", dev);
  const MatmulGrads g = ops_on(dev, "matmul_backward").matmul_backward(dy, x, w, need_dx, need_dw);
  const DType d = result_dtype({&dy, &x, &w});
  return {as(g.dx, d), as(g.dw, d)};
}

void bias_add_forward(Tensor& y, const Tensor& b) {
  const Device dev = device_of("bias_add_forward", {&y, &b});
  rules::bias_add_forward(y, b);
  in_place(y, [&](Tensor& t) { ops_on(dev, "bias_add_forward").bias_add_forward(t, f32(b)); });
}

Tensor bias_add_backward(const Tensor& dy) {
  const Device dev = device_of("bias_add_backward", {&dy});
  rules::bias_add_backward(dy);
  return as(ops_on(dev, "bias_add_backward").bias_add_backward(f32(dy)), result_dtype({&dy}));
}

Tensor add(const Tensor& a, const Tensor& b) {
  const Device dev = device_of("add", {&a, &b});
  rules::add(a, b, "add");
  return as(ops_on(dev, "add").add(f32(a), f32(b)), result_dtype({&a, &b}));
}

void add_(Tensor& a, const Tensor& b) {
  const Device dev = device_of("add_", {&a, &b});
  rules::add(a, b, "add_");
  in_place(a, [&](Tensor& t) { ops_on(dev, "add_").add_(t, f32(b)); });
}

void scale_(Tensor& a, float s) {
  const Device dev = device_of("scale_", {&a});
  in_place(a, [&](Tensor& t) { ops_on(dev, "scale_").scale_(t, s); });
}

Tensor gelu_forward(const Tensor& x) {
  const Device dev = device_of("gelu_forward", {&x});
  return as(ops_on(dev, "gelu_forward").gelu_forward(f32(x)), result_dtype({&x}));
}

Tensor gelu_backward(const Tensor& dy, const Tensor& x) {
  const Device dev = device_of("gelu_backward", {&dy, &x});
  rules::gelu_backward(dy, x);
  return as(ops_on(dev, "gelu_backward").gelu_backward(f32(dy), f32(x)), result_dtype({&dy, &x}));
}

LayerNormOut layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  const Device dev = device_of("layernorm_forward", {&x, &gamma, &beta});
  rules::layernorm_forward(x, gamma, beta);
  LayerNormOut o = ops_on(dev, "layernorm_forward").layernorm_forward(f32(x), f32(gamma), f32(beta), eps);
  o.y = as(o.y, result_dtype({&x, &gamma, &beta}));
  return o;  // mean and rstd stay f32 (statistics)
}

LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                  const Tensor& rstd) {
  const Device dev = device_of("layernorm_backward", {&dy, &x, &gamma, &mean, &rstd});
  rules::layernorm_backward(dy, x, gamma, mean, rstd);
  LayerNormGrads g =
      ops_on(dev, "layernorm_backward").layernorm_backward(f32(dy), f32(x), f32(gamma), f32(mean), f32(rstd));
  g.dx = as(g.dx, result_dtype({&dy, &x}));
  return g;  // dgamma and dbeta stay f32 (they accumulate into main_grad)
}

RMSNormOut rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps) {
  const Device dev = device_of("rmsnorm_forward", {&x, &weight});
  rules::rmsnorm_forward(x, weight, eps);
  RMSNormOut o = ops_on(dev, "rmsnorm_forward").rmsnorm_forward(f32(x), f32(weight), eps);
  o.y = as(o.y, result_dtype({&x, &weight}));
  return o;  // rstd stays f32 (a statistic)
}

Tensor rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                        Tensor& dweight) {
  const Device dev = device_of("rmsnorm_backward", {&dy, &x, &weight, &rstd, &dweight});
  rules::rmsnorm_backward(dy, x, weight, rstd, dweight);
  const Tensor dx =
      ops_on(dev, "rmsnorm_backward").rmsnorm_backward(f32(dy), f32(x), f32(weight), f32(rstd), dweight);
  return as(dx, result_dtype({&dy, &x}));  // dweight is the caller's f32 buffer
}

Tensor swiglu_forward(const Tensor& x) {
  const Device dev = device_of("swiglu_forward", {&x});
  rules::swiglu_forward(x);
  return as(ops_on(dev, "swiglu_forward").swiglu_forward(f32(x)), result_dtype({&x}));
}

Tensor swiglu_backward(const Tensor& dy, const Tensor& x) {
  const Device dev = device_of("swiglu_backward", {&dy, &x});
  rules::swiglu_backward(dy, x);
  return as(ops_on(dev, "swiglu_backward").swiglu_backward(f32(dy), f32(x)), result_dtype({&dy, &x}));
}

Tensor rope_forward(const Tensor& x, const std::vector<int64_t>& positions, int64_t d, float base) {
  const Device dev = device_of("rope_forward", {&x});
  rules::rope(x, positions, d, base, "rope_forward");
  const RopeTable t = rope_table(positions, d, base, +1);
  return as(ops_on(dev, "rope_forward").rope_rotate(f32(x), t.cos, t.sin, d), result_dtype({&x}));
}

Tensor rope_backward(const Tensor& dy, const std::vector<int64_t>& positions, int64_t d, float base) {
  const Device dev = device_of("rope_backward", {&dy});
  rules::rope(dy, positions, d, base, "rope_backward");
  const RopeTable t = rope_table(positions, d, base, -1);
  return as(ops_on(dev, "rope_backward").rope_rotate(f32(dy), t.cos, t.sin, d), result_dtype({&dy}));
}

Tensor softmax_forward(const Tensor& x) {
  const Device dev = device_of("softmax_forward", {&x});
  rules::softmax_forward(x);
  return as(ops_on(dev, "softmax_forward").softmax_forward(f32(x)), result_dtype({&x}));
}

Tensor softmax_backward(const Tensor& dy, const Tensor& y) {
  const Device dev = device_of("softmax_backward", {&dy, &y});
  rules::softmax_backward(dy, y);
  return as(ops_on(dev, "softmax_backward").softmax_backward(f32(dy), f32(y)), result_dtype({&dy, &y}));
}

AttentionOut attention_forward(const Tensor& qkv, const AttentionOptions& opt) {
  const Device dev = device_of("attention_forward", {&qkv});
  rules::attention_forward(qkv, opt);
  trace::Span span("attention", "forward", dev);
  AttentionOut o = ops_on(dev, "attention_forward").attention_forward(f32(qkv), opt);
  o.out = as(o.out, result_dtype({&qkv}));
  return o;  // probabilities stay f32
}

Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                          const AttentionOptions& opt) {
  const Device dev = device_of("attention_backward", {&dout, &qkv, &probs});
  rules::attention_backward(dout, qkv, probs, opt);
  trace::Span span("attention", "backward", dev);
  return as(ops_on(dev, "attention_backward").attention_backward(f32(dout), f32(qkv), f32(probs), opt),
            result_dtype({&dout, &qkv}));
}

Tensor embedding_forward(const TokenBatch& ids, const Tensor& wte, int64_t vocab_start) {
  const Device dev = device_of("embedding_forward", {&wte});
  rules::embedding_forward(ids, wte);
  return as(ops_on(dev, "embedding_forward").embedding_forward(ids, f32(wte), vocab_start),
            result_dtype({&wte}));
}

Tensor embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local,
                          int64_t vocab_start) {
  const Device dev = device_of("embedding_backward", {&dout});
  rules::embedding_backward(dout, ids, vocab_local);
  // a gradient: f32
  return ops_on(dev, "embedding_backward").embedding_backward(f32(dout), ids, vocab_local, vocab_start);
}

void position_embedding_add(Tensor& x, const Tensor& wpe, int64_t seq_start) {
  const Device dev = device_of("position_embedding_add", {&x, &wpe});
  rules::position_embedding_add(x, wpe, seq_start);
  in_place(x, [&](Tensor& t) {
    ops_on(dev, "position_embedding_add").position_embedding_add(t, f32(wpe), seq_start);
  });
}

Tensor position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start) {
  const Device dev = device_of("position_embedding_backward", {&dx});
  rules::position_embedding_backward(dx, max_seq, seq_start);
  // a gradient: f32
  return ops_on(dev, "position_embedding_backward").position_embedding_backward(f32(dx), max_seq, seq_start);
}

CrossEntropyOut cross_entropy_forward(const Tensor& logits, const std::vector<int64_t>& targets,
                                      float label_smoothing) {
  const Device dev = device_of("cross_entropy_forward", {&logits});
  rules::cross_entropy(logits, targets, label_smoothing, "cross_entropy_forward");
  // losses: f32
  return ops_on(dev, "cross_entropy_forward").cross_entropy_forward(f32(logits), targets, label_smoothing);
}

Tensor cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& targets, float dloss,
                              float label_smoothing) {
  const Device dev = device_of("cross_entropy_backward", {&logits});
  rules::cross_entropy(logits, targets, label_smoothing, "cross_entropy_backward");
  return as(ops_on(dev, "cross_entropy_backward")
                .cross_entropy_backward(f32(logits), targets, dloss, label_smoothing),
            result_dtype({&logits}));
}

Tensor dropout_forward(const Tensor& x, float p, const DropoutKey& key) {
  const Device dev = device_of("dropout_forward", {&x});
  if (p != 0.f) rules::dropout(x.shape(), p, key);  // p = 0 is the identity, whatever the key
  return as(ops_on(dev, "dropout_forward").dropout_forward(f32(x), p, key), result_dtype({&x}));
}

Tensor dropout_backward(const Tensor& dy, float p, const DropoutKey& key) {
  const Device dev = device_of("dropout_backward", {&dy});
  if (p != 0.f) rules::dropout(dy.shape(), p, key);
  return as(ops_on(dev, "dropout_backward").dropout_backward(f32(dy), p, key), result_dtype({&dy}));
}

void adamw_step(Tensor& param, const Tensor& grad, AdamWState& state, int64_t t, const AdamWConfig& cfg) {
  const Device dev = device_of("adamw_step", {&param, &grad, &state.m, &state.v});
  rules::adamw_step(param, grad, state, t);
  if (!state.m.defined()) state.m = Tensor(param.shape(), DType::f32, dev);  // created on first use
  if (!state.v.defined()) state.v = Tensor(param.shape(), DType::f32, dev);
  in_place(param, [&](Tensor& p) { ops_on(dev, "adamw_step").adamw_step(p, f32(grad), state, t, cfg); });
}

}  // namespace tpsp::ops
