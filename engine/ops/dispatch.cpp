// The public entry points of every op (engine/ops/*.h): check the device, widen bf16 inputs to f32,
// run the device's implementation (engine/ops/cpu/; engine/ops/cuda/ in a GPU build), and give the
// result the inputs' precision: bf16 when every floating input is bf16, else f32. So every GEMM and
// every reduction accumulates in f32 and a bf16 result is rounded once (docs/tolerances.md, bf16).
#include <initializer_list>

#include "engine/error.h"
#include "engine/ops/cpu/ops.h"
#include "engine/ops/ops.h"
#include "engine/trace.h"

namespace tpsp::ops {

namespace {

/// ShapeError unless every defined tensor is on the CPU (the only device with ops in this build).
void on_cpu(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    TPSP_CHECK(!t->defined() || t->device() == Device::cpu, op, ": a ", device_name(t->device()),
               " tensor, but this build has CPU ops only");
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

Tensor matmul_forward(const Tensor& x, const Tensor& w) {
  on_cpu("matmul_forward", {&x, &w});
  trace::Span span("gemm", "forward");
  return as(cpu::matmul_forward(f32(x), f32(w)), result_dtype({&x, &w}));
}

Tensor matmul_dgrad(const Tensor& dy, const Tensor& w) {
  on_cpu("matmul_dgrad", {&dy, &w});
  trace::Span span("gemm", "dgrad");
  return as(cpu::matmul_dgrad(f32(dy), f32(w)), result_dtype({&dy, &w}));
}

void matmul_wgrad(const Tensor& dy, const Tensor& x, Tensor& dw) {
  on_cpu("matmul_wgrad", {&dy, &x, &dw});
  TPSP_CHECK(dw.dtype() == DType::f32, "matmul_wgrad: the gradient buffer is ", dtype_name(dw.dtype()),
             "; gradients accumulate in f32 (a main_grad buffer)");
  trace::Span span("gemm", "wgrad");
  cpu::matmul_wgrad(f32(dy), f32(x), dw);
}

MatmulGrads matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx, bool need_dw) {
  on_cpu("matmul_backward", {&dy, &x, &w});
  trace::Span span("gemm", "backward");
  MatmulGrads g = cpu::matmul_backward(f32(dy), f32(x), f32(w), need_dx, need_dw);
  const DType d = result_dtype({&dy, &x, &w});
  return {as(g.dx, d), as(g.dw, d)};
}

void bias_add_forward(Tensor& y, const Tensor& b) {
  on_cpu("bias_add_forward", {&y, &b});
  in_place(y, [&](Tensor& t) { cpu::bias_add_forward(t, f32(b)); });
}

Tensor bias_add_backward(const Tensor& dy) {
  on_cpu("bias_add_backward", {&dy});
  return as(cpu::bias_add_backward(f32(dy)), result_dtype({&dy}));
}

Tensor add(const Tensor& a, const Tensor& b) {
  on_cpu("add", {&a, &b});
  return as(cpu::add(f32(a), f32(b)), result_dtype({&a, &b}));
}

void add_(Tensor& a, const Tensor& b) {
  on_cpu("add_", {&a, &b});
  in_place(a, [&](Tensor& t) { cpu::add_(t, f32(b)); });
}

void scale_(Tensor& a, float s) {
  on_cpu("scale_", {&a});
  in_place(a, [&](Tensor& t) { cpu::scale_(t, s); });
}

Tensor gelu_forward(const Tensor& x) {
  on_cpu("gelu_forward", {&x});
  return as(cpu::gelu_forward(f32(x)), result_dtype({&x}));
}

Tensor gelu_backward(const Tensor& dy, const Tensor& x) {
  on_cpu("gelu_backward", {&dy, &x});
  return as(cpu::gelu_backward(f32(dy), f32(x)), result_dtype({&dy, &x}));
}

LayerNormOut layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  on_cpu("layernorm_forward", {&x, &gamma, &beta});
  LayerNormOut o = cpu::layernorm_forward(f32(x), f32(gamma), f32(beta), eps);
  o.y = as(o.y, result_dtype({&x, &gamma, &beta}));
  return o;  // mean and rstd stay f32 (statistics)
}

LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                  const Tensor& rstd) {
  on_cpu("layernorm_backward", {&dy, &x, &gamma, &mean, &rstd});
  LayerNormGrads g = cpu::layernorm_backward(f32(dy), f32(x), f32(gamma), f32(mean), f32(rstd));
  g.dx = as(g.dx, result_dtype({&dy, &x}));
  return g;  // dgamma and dbeta stay f32 (they accumulate into main_grad)
}

Tensor softmax_forward(const Tensor& x) {
  on_cpu("softmax_forward", {&x});
  return as(cpu::softmax_forward(f32(x)), result_dtype({&x}));
}

Tensor softmax_backward(const Tensor& dy, const Tensor& y) {
  on_cpu("softmax_backward", {&dy, &y});
  return as(cpu::softmax_backward(f32(dy), f32(y)), result_dtype({&dy, &y}));
}

AttentionOut attention_forward(const Tensor& qkv, const AttentionOptions& opt) {
  on_cpu("attention_forward", {&qkv});
  trace::Span span("attention", "forward");
  AttentionOut o = cpu::attention_forward(f32(qkv), opt);
  o.out = as(o.out, result_dtype({&qkv}));
  return o;  // probabilities stay f32
}

Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                          const AttentionOptions& opt) {
  on_cpu("attention_backward", {&dout, &qkv, &probs});
  trace::Span span("attention", "backward");
  return as(cpu::attention_backward(f32(dout), f32(qkv), f32(probs), opt), result_dtype({&dout, &qkv}));
}

Tensor embedding_forward(const TokenBatch& ids, const Tensor& wte, int64_t vocab_start) {
  on_cpu("embedding_forward", {&wte});
  return as(cpu::embedding_forward(ids, f32(wte), vocab_start), result_dtype({&wte}));
}

Tensor embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local,
                          int64_t vocab_start) {
  on_cpu("embedding_backward", {&dout});
  return cpu::embedding_backward(f32(dout), ids, vocab_local, vocab_start);  // a gradient: f32
}

void position_embedding_add(Tensor& x, const Tensor& wpe, int64_t seq_start) {
  on_cpu("position_embedding_add", {&x, &wpe});
  in_place(x, [&](Tensor& t) { cpu::position_embedding_add(t, f32(wpe), seq_start); });
}

Tensor position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start) {
  on_cpu("position_embedding_backward", {&dx});
  return cpu::position_embedding_backward(f32(dx), max_seq, seq_start);  // a gradient: f32
}

CrossEntropyOut cross_entropy_forward(const Tensor& logits, const std::vector<int64_t>& targets,
                                      float label_smoothing) {
  on_cpu("cross_entropy_forward", {&logits});
  return cpu::cross_entropy_forward(f32(logits), targets, label_smoothing);  // losses: f32
}

Tensor cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& targets, float dloss,
                              float label_smoothing) {
  on_cpu("cross_entropy_backward", {&logits});
  return as(cpu::cross_entropy_backward(f32(logits), targets, dloss, label_smoothing),
            result_dtype({&logits}));
}

uint64_t dropout_stream(const std::string& site, int64_t iteration) {
  return cpu::dropout_stream(site, iteration);
}

Tensor dropout_mask(const Shape& local_shape, float p, const DropoutKey& key) {
  return cpu::dropout_mask(local_shape, p, key);
}

Tensor dropout_forward(const Tensor& x, float p, const DropoutKey& key) {
  on_cpu("dropout_forward", {&x});
  return as(cpu::dropout_forward(f32(x), p, key), result_dtype({&x}));
}

Tensor dropout_backward(const Tensor& dy, float p, const DropoutKey& key) {
  on_cpu("dropout_backward", {&dy});
  return as(cpu::dropout_backward(f32(dy), p, key), result_dtype({&dy}));
}

void adamw_step(Tensor& param, const Tensor& grad, AdamWState& state, int64_t t, const AdamWConfig& cfg) {
  on_cpu("adamw_step", {&param, &grad});
  in_place(param, [&](Tensor& p) { cpu::adamw_step(p, f32(grad), state, t, cfg); });
}

}  // namespace tpsp::ops
