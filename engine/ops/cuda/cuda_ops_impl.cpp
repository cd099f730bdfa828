// CudaOps: engine/ops on cuda tensors (DeviceOps, engine/ops/device_ops.h). Each op checks its
// arguments with the CPU op's rule and message (engine/ops/cpu/*), allocates its results on the
// device and runs cuBLAS (gemm.h) or a kernel (kernels.h). Inputs arrive as f32 cuda tensors from
// engine/ops/dispatch.cpp; the GEMMs also take bf16 operands.
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

namespace tpsp::cuda {
namespace {

constexpr Device kCuda = Device::cuda;

/// Rows of a [..., k] tensor flattened to a matrix: numel / last dim (0 when the last dim is 0).
int64_t leading_rows(const Tensor& t) {
  const int64_t last = t.size(-1);
  return last == 0 ? shape_numel(Shape(t.shape().begin(), t.shape().end() - 1)) : t.numel() / last;
}

/// Two GEMM operands of one dtype: as they are when they agree, else both widened to f32.
struct Operands {
  Tensor a, b;
  DType dtype;
};
Operands same_dtype(const Tensor& a, const Tensor& b) {
  if (a.dtype() == b.dtype()) return {a, b, a.dtype()};
  return {a.to(DType::f32), b.to(DType::f32), DType::f32};
}

/// Checks x [..., k], w [m, k] and dy [..., m] for `op`; returns {n, k, m} (engine/ops/cpu/matmul.cpp).
std::vector<int64_t> grad_dims(const Tensor& dy, const Tensor& x, const Shape& w_shape, const char* op) {
  TPSP_CHECK(x.dim() >= 1 && w_shape.size() == 2, op, ": x must be [..., k] and w [m, k], got x ",
             shape_str(x.shape()), " and w ", shape_str(w_shape));
  const int64_t k = x.size(-1), m = w_shape[0];
  TPSP_CHECK(w_shape[1] == k, op, ": x ", shape_str(x.shape()), " has last dim ", k, " but w ",
             shape_str(w_shape), " has dim 1 = ", w_shape[1]);
  Shape y_shape = x.shape();
  y_shape.back() = m;
  check_shape(dy, y_shape, (std::string(op) + ": dy").c_str());
  return {leading_rows(x), k, m};
}

void check_ids(const TokenBatch& ids, const char* what) {
  TPSP_CHECK(ids.b >= 0 && ids.s >= 0 && static_cast<int64_t>(ids.ids.size()) == ids.b * ids.s, what, ": ",
             ids.ids.size(), " ids do not fill [b, s] = [", ids.b, ", ", ids.s, "]");
}

/// Checks logits [n, V], n targets in [0, V) or kIgnoreIndex, α in [0, 1]; returns the n_valid rows.
int64_t check_ce_args(const Tensor& logits, const std::vector<int64_t>& targets, float label_smoothing,
                      const char* what) {
  TPSP_CHECK(logits.dim() == 2, what, ": logits must be [n, V], got ", shape_str(logits.shape()));
  const int64_t n = logits.size(0), V = logits.size(1);
  TPSP_CHECK(static_cast<int64_t>(targets.size()) == n, what, ": ", targets.size(), " targets for ", n,
             " rows of logits ", shape_str(logits.shape()));
  TPSP_CHECK(label_smoothing >= 0.f && label_smoothing <= 1.f, what, ": label_smoothing ", label_smoothing,
             " is outside [0, 1]");
  int64_t n_valid = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = targets[static_cast<std::size_t>(i)];
    if (t == kIgnoreIndex) continue;
    TPSP_CHECK(t >= 0 && t < V, what, ": target ", t, " at row ", i, " is outside [0, ", V,
               ") and is not ignore_index ", kIgnoreIndex);
    ++n_valid;
  }
  return n_valid;
}

/// NumericError for the first row whose logits hold a NaN or +inf (bad[i] = its column, −1 if none).
void throw_bad_logit(const Tensor& logits, const std::vector<int64_t>& bad, int64_t row, const char* what) {
  const int64_t j = bad[static_cast<std::size_t>(row)];
  if (j < 0) return;
  const float v = logits.slice0(row, row + 1).to(Device::cpu).at(j);
  throw NumericError(
      detail::cat(what, ": logit ", v, " at row ", row, ", column ", j, " is not a finite number"));
}

class CudaOps final : public ops::DeviceOps {
 public:
  Tensor matmul_forward(const Tensor& x, const Tensor& w) override {
    TPSP_CHECK(x.dim() >= 1 && w.dim() == 2, "matmul_forward: x must be [..., k] and w [m, k], got x ",
               shape_str(x.shape()), " and w ", shape_str(w.shape()));
    const int64_t k = x.size(-1), m = w.size(0);
    TPSP_CHECK(w.size(1) == k, "matmul_forward: x ", shape_str(x.shape()), " has last dim ", k, " but w ",
               shape_str(w.shape()), " has dim 1 = ", w.size(1));
    Shape out_shape = x.shape();
    out_shape.back() = m;
    Tensor y = Tensor::empty(out_shape, DType::f32, kCuda);
    const Operands o = same_dtype(x, w);  // Y[n, m] = X[n, k] · W[m, k]ᵀ
    gemm(false, true, leading_rows(x), m, k, 1.f, o.a.raw_data(), k, o.b.raw_data(), k, 0.f,
         dptr(y, "matmul_forward"), m, o.dtype);
    return y;
  }

  Tensor matmul_dgrad(const Tensor& dy, const Tensor& w) override {
    TPSP_CHECK(dy.dim() >= 1 && w.dim() == 2 && dy.size(-1) == w.size(0),
               "matmul_dgrad: dy must be [..., m] and w [m, k], got dy ", shape_str(dy.shape()), " and w ",
               shape_str(w.shape()));
    const int64_t m = w.size(0), k = w.size(1);
    Shape x_shape = dy.shape();
    x_shape.back() = k;
    Tensor dx = Tensor::empty(x_shape, DType::f32, kCuda);
    const Operands o = same_dtype(dy, w);  // dX[n, k] = dY[n, m] · W[m, k]
    gemm(false, false, leading_rows(dy), k, m, 1.f, o.a.raw_data(), m, o.b.raw_data(), k, 0.f,
         dptr(dx, "matmul_dgrad"), k, o.dtype);
    return dx;
  }

  void matmul_wgrad(const Tensor& dy, const Tensor& x, Tensor& dw) override {
    const std::vector<int64_t> nkm = grad_dims(dy, x, dw.shape(), "matmul_wgrad");
    const Operands o = same_dtype(dy, x);  // dW[m, k] += dY[n, m]ᵀ · X[n, k]  (β = 1)
    gemm(true, false, nkm[2], nkm[1], nkm[0], 1.f, o.a.raw_data(), nkm[2], o.b.raw_data(), nkm[1], 1.f,
         dptr(dw, "matmul_wgrad"), nkm[1], o.dtype);
  }

  ops::MatmulGrads matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx,
                                   bool need_dw) override {
    grad_dims(dy, x, w.shape(), "matmul_backward");
    ops::MatmulGrads g;
    if (need_dx) g.dx = matmul_dgrad(dy, w);
    if (need_dw) {
      g.dw = Tensor(w.shape(), DType::f32, kCuda);
      matmul_wgrad(dy, x, g.dw);
    }
    return g;
  }

  void bias_add_forward(Tensor& y, const Tensor& b) override {
    TPSP_CHECK(y.dim() >= 1 && b.dim() == 1 && y.size(-1) == b.size(0), "bias_add_forward: y ",
               shape_str(y.shape()), " needs a bias of its last dim, got b ", shape_str(b.shape()));
    kernels::bias_add(dptr(y, "bias_add_forward"), dptr(b, "bias_add_forward"), leading_rows(y), b.size(0));
  }

  Tensor bias_add_backward(const Tensor& dy) override {
    TPSP_CHECK(dy.dim() >= 1, "bias_add_backward: dy must be [..., m], got ", shape_str(dy.shape()));
    const int64_t m = dy.size(-1);
    Tensor db({m}, DType::f32, kCuda);
    kernels::bias_grad(dptr(db, "bias_add_backward"), dptr(dy, "bias_add_backward"), leading_rows(dy), m);
    return db;
  }

  Tensor add(const Tensor& a, const Tensor& b) override {
    check_same_shape(a, b, "add");
    Tensor out = Tensor::empty(a.shape(), DType::f32, kCuda);
    kernels::add(dptr(out, "add"), dptr(a, "add"), dptr(b, "add"), a.numel());
    return out;
  }

  void add_(Tensor& a, const Tensor& b) override {
    check_same_shape(a, b, "add_");
    kernels::add_inplace(dptr(a, "add_"), dptr(b, "add_"), a.numel());
  }

  void scale_(Tensor& a, float s) override { kernels::scale_inplace(dptr(a, "scale_"), s, a.numel()); }

  Tensor gelu_forward(const Tensor& x) override {
    Tensor y = Tensor::empty(x.shape(), DType::f32, kCuda);
    kernels::gelu_forward(dptr(y, "gelu_forward"), dptr(x, "gelu_forward"), x.numel());
    return y;
  }

  Tensor gelu_backward(const Tensor& dy, const Tensor& x) override {
    check_same_shape(dy, x, "gelu_backward");
    Tensor dx = Tensor::empty(x.shape(), DType::f32, kCuda);
    kernels::gelu_backward(dptr(dx, "gelu_backward"), dptr(dy, "gelu_backward"), dptr(x, "gelu_backward"),
                           x.numel());
    return dx;
  }

  ops::LayerNormOut layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      float eps) override {
    const char* what = "layernorm_forward: gamma/beta";
    TPSP_CHECK(x.dim() >= 1, what, ": x must be [..., h], got ", shape_str(x.shape()));
    const int64_t h = x.size(-1);
    check_shape(gamma, {h}, what);
    check_shape(beta, {h}, what);
    const int64_t n = h == 0 ? 0 : x.numel() / h;
    ops::LayerNormOut out{Tensor::empty(x.shape(), DType::f32, kCuda), Tensor::empty({n}, DType::f32, kCuda),
                          Tensor::empty({n}, DType::f32, kCuda)};
    kernels::layernorm_forward(dptr(out.y, what), dptr(out.mean, what), dptr(out.rstd, what), dptr(x, what),
                               dptr(gamma, what), dptr(beta, what), n, h, eps);
    return out;
  }

  ops::LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                         const Tensor& mean, const Tensor& rstd) override {
    const char* what = "layernorm_backward: gamma";
    TPSP_CHECK(x.dim() >= 1, what, ": x must be [..., h], got ", shape_str(x.shape()));
    const int64_t h = x.size(-1);
    check_shape(gamma, {h}, what);
    check_same_shape(dy, x, "layernorm_backward: dy and x");
    const int64_t n = h == 0 ? 0 : x.numel() / h;
    check_shape(mean, {n}, "layernorm_backward: mean");
    check_shape(rstd, {n}, "layernorm_backward: rstd");
    ops::LayerNormGrads g{Tensor(x.shape(), DType::f32, kCuda), Tensor({h}, DType::f32, kCuda),
                          Tensor({h}, DType::f32, kCuda)};
    kernels::layernorm_backward(dptr(g.dx, what), dptr(g.dgamma, what), dptr(g.dbeta, what), dptr(dy, what),
                                dptr(x, what), dptr(gamma, what), dptr(mean, what), dptr(rstd, what), n, h);
    return g;
  }

  Tensor softmax_forward(const Tensor& x) override {
    TPSP_CHECK(x.dim() >= 1, "softmax_forward: x must be [..., n], got ", shape_str(x.shape()));
    const int64_t n = x.size(-1);
    Tensor y(x.shape(), DType::f32, kCuda);
    if (n > 0)
      kernels::softmax_forward(dptr(y, "softmax_forward"), dptr(x, "softmax_forward"), x.numel() / n, n);
    return y;
  }

  Tensor softmax_backward(const Tensor& dy, const Tensor& y) override {
    check_same_shape(dy, y, "softmax_backward");
    TPSP_CHECK(y.dim() >= 1, "softmax_backward: y must be [..., n], got ", shape_str(y.shape()));
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
    check_ids(ids, "embedding_forward");
    TPSP_CHECK(wte.dim() == 2, "embedding_forward: wte must be [V_local, h], got ", shape_str(wte.shape()));
    const int64_t h = wte.size(1);
    Tensor out({ids.s, ids.b, h}, DType::f32, kCuda);
    const DeviceArray<int64_t> d_ids(ids.ids);
    kernels::embedding_forward(dptr(out, "embedding_forward"), d_ids.get(), dptr(wte, "embedding_forward"),
                               ids.b, ids.s, h, wte.size(0), vocab_start);
    return out;
  }

  Tensor embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local,
                            int64_t vocab_start) override {
    check_ids(ids, "embedding_backward");
    TPSP_CHECK(dout.dim() == 3 && dout.size(0) == ids.s && dout.size(1) == ids.b,
               "embedding_backward: dout must be [s, b, h] = [", ids.s, ", ", ids.b, ", h], got ",
               shape_str(dout.shape()));
    TPSP_CHECK(vocab_local >= 0, "embedding_backward: vocab_local ", vocab_local, " is negative");
    const int64_t h = dout.size(2);
    Tensor dwte({vocab_local, h}, DType::f32, kCuda);
    const DeviceArray<int64_t> d_ids(ids.ids);
    kernels::embedding_backward(dptr(dwte, "embedding_backward"), dptr(dout, "embedding_backward"),
                                d_ids.get(), ids.b, ids.s, h, vocab_local, vocab_start);
    return dwte;
  }

  void position_embedding_add(Tensor& x, const Tensor& wpe, int64_t seq_start) override {
    TPSP_CHECK(x.dim() == 3 && wpe.dim() == 2 && x.size(2) == wpe.size(1),
               "position_embedding_add: x must be [s, b, h] and wpe [max_seq, h], got x ",
               shape_str(x.shape()), " and wpe ", shape_str(wpe.shape()));
    const int64_t s = x.size(0), max_seq = wpe.size(0);
    TPSP_CHECK(seq_start >= 0 && seq_start + s <= max_seq, "position_embedding_add: positions [", seq_start,
               ", ", seq_start + s, ") are outside [0, ", max_seq, ") of wpe");
    kernels::position_add(dptr(x, "position_embedding_add"), dptr(wpe, "position_embedding_add"), s,
                          x.size(1), x.size(2), seq_start);
  }

  Tensor position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start) override {
    TPSP_CHECK(dx.dim() == 3, "position_embedding_backward: dx must be [s, b, h], got ",
               shape_str(dx.shape()));
    const int64_t s = dx.size(0), b = dx.size(1), h = dx.size(2);
    TPSP_CHECK(seq_start >= 0 && seq_start + s <= max_seq, "position_embedding_backward: positions [",
               seq_start, ", ", seq_start + s, ") are outside [0, ", max_seq, ")");
    Tensor dwpe({max_seq, h}, DType::f32, kCuda);
    kernels::position_backward(dptr(dwpe, "position_embedding_backward"),
                               dptr(dx, "position_embedding_backward"), s, b, h, seq_start);
    return dwpe;
  }

  ops::CrossEntropyOut cross_entropy_forward(const Tensor& logits, const std::vector<int64_t>& targets,
                                             float label_smoothing) override {
    const char* what = "cross_entropy_forward";
    const int64_t n_valid = check_ce_args(logits, targets, label_smoothing, what);
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
      if (!std::isfinite(l))
        throw NumericError(detail::cat(what, ": the loss of row ", i, " (target ", t, ") is ", l));
      total += l;
    }
    out.loss = n_valid == 0 ? 0.f : static_cast<float>(total / static_cast<double>(n_valid));
    return out;
  }

  Tensor cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& targets, float dloss,
                                float label_smoothing) override {
    const char* what = "cross_entropy_backward";
    const int64_t n_valid = check_ce_args(logits, targets, label_smoothing, what);
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
        throw NumericError(detail::cat(what, ": row ", i, " has no finite logit (log-sum-exp ",
                                       lse[static_cast<std::size_t>(i)], ")"));
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
    TPSP_CHECK(t >= 1, "adamw_step: step t = ", t, " must be >= 1 (1-based)");
    check_same_shape(param, grad, "adamw_step: param and grad");
    if (!state.m.defined()) state.m = Tensor(param.shape(), DType::f32, kCuda);
    if (!state.v.defined()) state.v = Tensor(param.shape(), DType::f32, kCuda);
    check_same_shape(param, state.m, "adamw_step: param and state.m");
    check_same_shape(param, state.v, "adamw_step: param and state.v");
    // The scalars exactly as engine/ops/cpu/adamw.cpp forms them (double, rounded to float).
    const double lr = cfg.lr, b1 = cfg.beta1, b2 = cfg.beta2;
    kernels::AdamWScalars k{};
    k.decay = static_cast<float>(1.0 - lr * static_cast<double>(cfg.weight_decay));
    k.beta1 = cfg.beta1;
    k.one_minus_b1 = static_cast<float>(1.0 - b1);
    k.beta2 = cfg.beta2;
    k.one_minus_b2 = static_cast<float>(1.0 - b2);
    k.neg_step_size = static_cast<float>(-(lr / (1.0 - std::pow(b1, static_cast<double>(t)))));
    k.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(b2, static_cast<double>(t))));
    k.eps = cfg.eps;
    TPSP_CHECK(param.raw_data() != grad.raw_data(),
               "adamw_step: grad must not share the parameter's storage");
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
