// CudaOps: engine/ops on cuda tensors (DeviceOps, engine/ops/device_ops.h). Each op receives
// arguments that passed its rule (engine/ops/rules.h, checked by engine/ops/dispatch.cpp), allocates
// its results on the device and runs cuBLAS (gemm.h) or a kernel (kernels.h). Inputs arrive as f32
// cuda tensors; the GEMMs also take bf16 operands.
#include <cmath>
#include <limits>
#include <vector>

#include "engine/error.h"
#include "engine/ops/cuda/attention.h"
#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/gemm.h"
#include "engine/ops/cuda/kernels.h"
#include "engine/ops/cuda/op_args.h"
#include "engine/ops/device_ops.h"
#include "engine/ops/rules.h"

namespace tpsp::cuda {
namespace {

constexpr Device kCuda = Device::cuda;

/// Two GEMM operands of one dtype: as they are when they agree, else both widened to f32.
struct Operands {
  Tensor a, b;
  DType dtype;
};
Operands same_dtype(const Tensor& a, const Tensor& b) {
  if (a.dtype() == b.dtype()) return {a, b, a.dtype()};
  return {a.to(DType::f32), b.to(DType::f32), DType::f32};
}

/// NumericError for the first row whose logits hold a NaN or +inf (bad[i] = its column, −1 if none).
void throw_bad_logit(const Tensor& logits, const std::vector<int64_t>& bad, int64_t row, const char* what) {
  const int64_t j = bad[static_cast<std::size_t>(row)];
  if (j < 0) return;
  const float v = logits.slice0(row, row + 1).to(Device::cpu).at(j);
  throw ops::bad_logit_error(what, v, row, j);
}

class CudaOps final : public ops::DeviceOps {
 public:
  Tensor matmul_forward(const Tensor& x, const Tensor& w) override {
    const int64_t k = x.size(-1), m = w.size(0);
    Shape out_shape = x.shape();
    out_shape.back() = m;
    Tensor y = Tensor::empty(out_shape, DType::f32, kCuda);
    const Operands o = same_dtype(x, w);  // Y[n, m] = X[n, k] · W[m, k]ᵀ
    gemm(false, true, ops::leading_rows(x), m, k, 1.f, o.a.raw_data(), k, o.b.raw_data(), k, 0.f,
         dptr(y, "matmul_forward"), m, o.dtype);
    return y;
  }

  Tensor matmul_dgrad(const Tensor& dy, const Tensor& w) override {
    const int64_t m = w.size(0), k = w.size(1);
    Shape x_shape = dy.shape();
    x_shape.back() = k;
    Tensor dx = Tensor::empty(x_shape, DType::f32, kCuda);
    const Operands o = same_dtype(dy, w);  // dX[n, k] = dY[n, m] · W[m, k]
    gemm(false, false, ops::leading_rows(dy), k, m, 1.f, o.a.raw_data(), m, o.b.raw_data(), k, 0.f,
         dptr(dx, "matmul_dgrad"), k, o.dtype);
    return dx;
  }

  void matmul_wgrad(const Tensor& dy, const Tensor& x, Tensor& dw) override {
    const int64_t n = ops::leading_rows(x), k = x.size(-1), m = dw.size(0);
    const Operands o = same_dtype(dy, x);  // dW[m, k] += dY[n, m]ᵀ · X[n, k]  (β = 1)
    gemm(true, false, m, k, n, 1.f, o.a.raw_data(), m, o.b.raw_data(), k, 1.f, dptr(dw, "matmul_wgrad"), k,
         o.dtype);
  }

  ops::MatmulGrads matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx,
                                   bool need_dw) override {
    ops::MatmulGrads g;
    if (need_dx) g.dx = matmul_dgrad(dy, w);
    if (need_dw) {
      g.dw = Tensor(w.shape(), DType::f32, kCuda);
      matmul_wgrad(dy, x, g.dw);
    }
    return g;
  }

  void bias_add_forward(Tensor& y, const Tensor& b) override {
    kernels::bias_add(dptr(y, "bias_add_forward"), dptr(b, "bias_add_forward"), ops::leading_rows(y),
                      b.size(0));
  }

  Tensor bias_add_backward(const Tensor& dy) override {
    const int64_t m = dy.size(-1);
    Tensor db({m}, DType::f32, kCuda);
    kernels::bias_grad(dptr(db, "bias_add_backward"), dptr(dy, "bias_add_backward"), ops::leading_rows(dy),
                       m);
    return db;
  }

  Tensor add(const Tensor& a, const Tensor& b) override {
    Tensor out = Tensor::empty(a.shape(), DType::f32, kCuda);
    kernels::add(dptr(out, "add"), dptr(a, "add"), dptr(b, "add"), a.numel());
    return out;
  }

  void add_(Tensor& a, const Tensor& b) override {
    kernels::add_inplace(dptr(a, "add_"), dptr(b, "add_"), a.numel());
  }

  void scale_(Tensor& a, float s) override { kernels::scale_inplace(dptr(a, "scale_"), s, a.numel()); }

  Tensor gelu_forward(const Tensor& x) override {
    Tensor y = Tensor::empty(x.shape(), DType::f32, kCuda);
    kernels::gelu_forward(dptr(y, "gelu_forward"), dptr(x, "gelu_forward"), x.numel());
    return y;
  }

  Tensor gelu_backward(const Tensor& dy, const Tensor& x) override {
    Tensor dx = Tensor::empty(x.shape(), DType::f32, kCuda);
    kernels::gelu_backward(dptr(dx, "gelu_backward"), dptr(dy, "gelu_backward"), dptr(x, "gelu_backward"),
                           x.numel());
    return dx;
  }

  ops::LayerNormOut layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      float eps) override {
    const char* what = "layernorm_forward";
    const int64_t h = x.size(-1);
    const int64_t n = h == 0 ? 0 : x.numel() / h;
    ops::LayerNormOut out{Tensor::empty(x.shape(), DType::f32, kCuda), Tensor::empty({n}, DType::f32, kCuda),
                          Tensor::empty({n}, DType::f32, kCuda)};
    kernels::layernorm_forward(dptr(out.y, what), dptr(out.mean, what), dptr(out.rstd, what), dptr(x, what),
                               dptr(gamma, what), dptr(beta, what), n, h, eps);
    return out;
  }

  ops::LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                         const Tensor& mean, const Tensor& rstd) override {
    const char* what = "layernorm_backward";
    const int64_t h = x.size(-1);
    const int64_t n = h == 0 ? 0 : x.numel() / h;
    ops::LayerNormGrads g{Tensor(x.shape(), DType::f32, kCuda), Tensor({h}, DType::f32, kCuda),
                          Tensor({h}, DType::f32, kCuda)};
    kernels::layernorm_backward(dptr(g.dx, what), dptr(g.dgamma, what), dptr(g.dbeta, what), dptr(dy, what),
                                dptr(x, what), dptr(gamma, what), dptr(mean, what), dptr(rstd, what), n, h);
    return g;
  }

  ops::RMSNormOut rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps) override {
    const char* what = "rmsnorm_forward";
    const int64_t h = x.size(-1);
    const int64_t n = h == 0 ? 0 : x.numel() / h;
    ops::RMSNormOut out{Tensor::empty(x.shape(), DType::f32, kCuda), Tensor::empty({n}, DType::f32, kCuda)};
    kernels::rmsnorm_forward(dptr(out.y, what), dptr(out.rstd, what), dptr(x, what), dptr(weight, what), n, h,
                             eps);
    return out;
  }

  Tensor rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                          Tensor& dweight) override {
    const char* what = "rmsnorm_backward";
    const int64_t h = x.size(-1);
    const int64_t n = h == 0 ? 0 : x.numel() / h;
    Tensor dx = Tensor::empty(x.shape(), DType::f32, kCuda);
    kernels::rmsnorm_backward(dptr(dx, what), dptr(dweight, what), dptr(dy, what), dptr(x, what),
                              dptr(weight, what), dptr(rstd, what), n, h);
    return dx;
  }

  Tensor swiglu_forward(const Tensor& x) override {
    const int64_t f = x.size(-1) / 2;
    Shape y_shape = x.shape();
    y_shape.back() = f;
    Tensor y = Tensor::empty(y_shape, DType::f32, kCuda);
    kernels::swiglu_forward(dptr(y, "swiglu_forward"), dptr(x, "swiglu_forward"), ops::leading_rows(x), f);
    return y;
  }

  Tensor swiglu_backward(const Tensor& dy, const Tensor& x) override {
    Tensor dx = Tensor::empty(x.shape(), DType::f32, kCuda);
    kernels::swiglu_backward(dptr(dx, "swiglu_backward"), dptr(dy, "swiglu_backward"),
                             dptr(x, "swiglu_backward"), ops::leading_rows(x), x.size(-1) / 2);
    return dx;
  }

  Tensor rope_rotate(const Tensor& x, const std::vector<float>& cos, const std::vector<float>& sin,
                     int64_t d) override {
    Tensor y = Tensor::empty(x.shape(), DType::f32, kCuda);
    const DeviceArray<float> d_cos(cos), d_sin(sin);
    kernels::rope_rotate(dptr(y, "rope"), dptr(x, "rope"), d_cos.get(), d_sin.get(), x.size(0), x.size(1),
                         x.size(2) / d, d);
    return y;
  }

  Tensor softmax_forward(const Tensor& x) override {
    const int64_t n = x.size(-1);
    Tensor y(x.shape(), DType::f32, kCuda);
    if (n > 0)
      kernels::softmax_forward(dptr(y, "softmax_forward"), dptr(x, "softmax_forward"), x.numel() / n, n);
    return y;
  }

  Tensor softmax_backward(const Tensor& dy, const Tensor& y) override {
    const int64_t n = y.size(-1);
    Tensor dx(y.shape(), DType::f32, kCuda);
    if (n > 0)
      kernels::softmax_backward(dptr(dx, "softmax_backward"), dptr(dy, "softmax_backward"),
                                dptr(y, "softmax_backward"), y.numel() / n, n);
    return dx;
  }

  ops::AttentionOut attention_forward(const Tensor& qkv, const ops::AttentionOptions& opt) override {
    return cuda::attention_forward(qkv, opt);
  }

  Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                            const ops::AttentionOptions& opt) override {
    return cuda::attention_backward(dout, qkv, probs, opt);
  }

  Tensor embedding_forward(const TokenBatch& ids, const Tensor& wte, int64_t vocab_start) override {
    const int64_t h = wte.size(1);
    Tensor out({ids.s, ids.b, h}, DType::f32, kCuda);
    const DeviceArray<int64_t> d_ids(ids.ids);
    kernels::embedding_forward(dptr(out, "embedding_forward"), d_ids.get(), dptr(wte, "embedding_forward"),
                               ids.b, ids.s, h, wte.size(0), vocab_start);
    return out;
  }

  Tensor embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local,
                            int64_t vocab_start) override {
    const int64_t h = dout.size(2);
    Tensor dwte({vocab_local, h}, DType::f32, kCuda);
    const DeviceArray<int64_t> d_ids(ids.ids);
    kernels::embedding_backward(dptr(dwte, "embedding_backward"), dptr(dout, "embedding_backward"),
                                d_ids.get(), ids.b, ids.s, h, vocab_local, vocab_start);
    return dwte;
  }

  void position_embedding_add(Tensor& x, const Tensor& wpe, int64_t seq_start) override {
    kernels::position_add(dptr(x, "position_embedding_add"), dptr(wpe, "position_embedding_add"), x.size(0),
                          x.size(1), x.size(2), seq_start);
  }

  Tensor position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start) override {
    const int64_t s = dx.size(0), b = dx.size(1), h = dx.size(2);
    Tensor dwpe({max_seq, h}, DType::f32, kCuda);
    kernels::position_backward(dptr(dwpe, "position_embedding_backward"),
                               dptr(dx, "position_embedding_backward"), s, b, h, seq_start);
    return dwpe;
  }

  ops::CrossEntropyOut cross_entropy_forward(const Tensor& logits, const std::vector<int64_t>& targets,
                                             float label_smoothing) override {
    const char* what = "cross_entropy_forward";
    const int64_t n_valid = ops::counted_rows(targets);
    const int64_t n = logits.size(0), V = logits.size(1);
    ops::CrossEntropyOut out{Tensor({n}, DType::f32, kCuda), 0.f, n_valid};
    if (n == 0) return out;
    const DeviceArray<int64_t> d_targets(targets);
    DeviceArray<double> d_loss(static_cast<std::size_t>(n));
    DeviceArray<int64_t> d_bad(static_cast<std::size_t>(n));
    kernels::cross_entropy_forward(d_loss.get(), dptr(out.losses, what), d_bad.get(), dptr(logits, what),
                                   d_targets.get(), n, V, label_smoothing);
    const std::vector<double> loss = d_loss.to_host();
    const std::vector<int64_t> bad = d_bad.to_host();
    double total = 0.0;  // in row order, as the CPU
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = targets[static_cast<std::size_t>(i)];
      if (t == kIgnoreIndex) continue;
      throw_bad_logit(logits, bad, i, what);
      const double l = loss[static_cast<std::size_t>(i)];
      if (!std::isfinite(l)) throw ops::infinite_loss_error(what, i, t, l);
      total += l;
    }
    out.loss = n_valid == 0 ? 0.f : static_cast<float>(total / static_cast<double>(n_valid));
    return out;
  }

  Tensor cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& targets, float dloss,
                                float label_smoothing) override {
    const char* what = "cross_entropy_backward";
    const int64_t n_valid = ops::counted_rows(targets);
    const int64_t n = logits.size(0), V = logits.size(1);
    Tensor dlogits({n, V}, DType::f32, kCuda);
    if (n_valid == 0) return dlogits;
    const DeviceArray<int64_t> d_targets(targets);
    DeviceArray<double> d_lse(static_cast<std::size_t>(n));
    DeviceArray<int64_t> d_bad(static_cast<std::size_t>(n));
    const double scale = static_cast<double>(dloss) / static_cast<double>(n_valid);
    kernels::cross_entropy_backward(dptr(dlogits, what), d_lse.get(), d_bad.get(), dptr(logits, what),
                                    d_targets.get(), n, V, label_smoothing, scale);
    const std::vector<double> lse = d_lse.to_host();
    const std::vector<int64_t> bad = d_bad.to_host();
    for (int64_t i = 0; i < n; ++i) {
      if (targets[static_cast<std::size_t>(i)] == kIgnoreIndex) continue;
      throw_bad_logit(logits, bad, i, what);
      if (!std::isfinite(lse[static_cast<std::size_t>(i)]))
        throw ops::no_finite_logit_error(what, i, lse[static_cast<std::size_t>(i)]);
    }
    return dlogits;
  }

  Tensor dropout_forward(const Tensor& x, float p, const ops::DropoutKey& key) override {
    if (p == 0.f) return x.clone();
    const DropoutIndex index = make_dropout_index(x.shape(), p, key);
    Tensor y = Tensor::empty(x.shape(), DType::f32, kCuda);
    kernels::dropout_apply(dptr(y, "dropout"), dptr(x, "dropout"), x.numel(), index);
    return y;
  }

  Tensor dropout_backward(const Tensor& dy, float p, const ops::DropoutKey& key) override {
    return dropout_forward(dy, p, key);
  }

  void adamw_step(Tensor& param, const Tensor& grad, ops::AdamWState& state, int64_t t,
                  const ops::AdamWConfig& cfg) override {
    const kernels::AdamWScalars k = ops::adamw_scalars(cfg, t);
    kernels::adamw(dptr(param, "adamw_step"), dptr(state.m, "adamw_step"), dptr(state.v, "adamw_step"),
                   dptr(grad, "adamw_step"), param.numel(), k);
  }
};

}  // namespace

ops::DeviceOps& cuda_ops() {
  static CudaOps ops;
  return ops;
}

}  // namespace tpsp::cuda
