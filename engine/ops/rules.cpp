// The argument rules of every op and the geometry derived from them (rules.h).
#include "engine/ops/rules.h"

#include <cmath>

#include "engine/ops/cross_entropy.h"
#include "engine/packed_seq.h"

namespace tpsp::ops {

int64_t leading_rows(const Tensor& t) {
  const int64_t last = t.size(-1);
  return last == 0 ? shape_numel(Shape(t.shape().begin(), t.shape().end() - 1)) : t.numel() / last;
}

AttentionDims attention_dims(const Tensor& qkv, const AttentionOptions& opt) {
  const int64_t groups = opt.query_groups > 0 ? opt.query_groups : opt.heads;
  return AttentionDims{qkv.size(0), qkv.size(1), opt.heads, qkv.size(2) / (groups * (opt.heads / groups + 2)),
                       groups};
}

std::vector<int64_t> first_visible_key(const AttentionOptions& opt, int64_t s) {
  std::vector<int64_t> first(static_cast<std::size_t>(s), 0);
  for (std::size_t k = 0; k + 1 < opt.cu_seqlens.size(); ++k)
    for (int64_t i = opt.cu_seqlens[k]; i < opt.cu_seqlens[k + 1]; ++i)
      first[static_cast<std::size_t>(i)] = opt.cu_seqlens[k];
  return first;
}

AdamWScalars adamw_scalars(const AdamWConfig& cfg, int64_t t) {
  const double lr = cfg.lr, b1 = cfg.beta1, b2 = cfg.beta2;
  const double bias_correction1 = 1.0 - std::pow(b1, static_cast<double>(t));
  const double bias_correction2 = 1.0 - std::pow(b2, static_cast<double>(t));
  return {static_cast<float>(1.0 - lr * static_cast<double>(cfg.weight_decay)),
          cfg.beta1,
          static_cast<float>(1.0 - b1),
          cfg.beta2,
          static_cast<float>(1.0 - b2),
          static_cast<float>(-(lr / bias_correction1)),
          static_cast<float>(std::sqrt(bias_correction2)),
          cfg.eps};
}

RopeTable rope_table(const std::vector<int64_t>& positions, int64_t d, float base, int sign) {
  const int64_t half = d / 2;
  RopeTable t;
  t.cos.resize(positions.size() * static_cast<std::size_t>(half));
  t.sin.resize(t.cos.size());
  for (std::size_t r = 0; r < positions.size(); ++r)
    for (int64_t i = 0; i < half; ++i) {
      const double theta =
          std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / static_cast<double>(d));
      const double angle = static_cast<double>(sign) * static_cast<double>(positions[r]) * theta;
      t.cos[r * static_cast<std::size_t>(half) + static_cast<std::size_t>(i)] =
          static_cast<float>(std::cos(angle));
      t.sin[r * static_cast<std::size_t>(half) + static_cast<std::size_t>(i)] =
          static_cast<float>(std::sin(angle));
    }
  return t;
}

int64_t counted_rows(const std::vector<int64_t>& targets) {
  int64_t n = 0;
  for (const int64_t t : targets) n += t != kIgnoreIndex;
  return n;
}

NumericError bad_logit_error(const char* what, float value, int64_t row, int64_t col) {
  return NumericError(
      detail::cat(what, ": logit ", value, " at row ", row, ", column ", col, " is not a finite number"));
}

NumericError infinite_loss_error(const char* what, int64_t row, int64_t target, double loss) {
  return NumericError(detail::cat(what, ": the loss of row ", row, " (target ", target, ") is ", loss));
}

NumericError no_finite_logit_error(const char* what, int64_t row, double lse) {
  return NumericError(detail::cat(what, ": row ", row, " has no finite logit (log-sum-exp ", lse, ")"));
}

namespace rules {
namespace {

/// x [..., k] and w [m, k] for `op`; returns x's shape with the last dim m (the shape of Y and dY).
Shape linear_output_shape(const Tensor& x, const Shape& w_shape, const char* op) {
  TPSP_CHECK(x.dim() >= 1 && w_shape.size() == 2, op, ": x must be [..., k] and w [m, k], got x ",
             shape_str(x.shape()), " and w ", shape_str(w_shape));
  const int64_t k = x.size(-1);
  TPSP_CHECK(w_shape[1] == k, op, ": x ", shape_str(x.shape()), " has last dim ", k, " but w ",
             shape_str(w_shape), " has dim 1 = ", w_shape[1]);
  Shape y_shape = x.shape();
  y_shape.back() = w_shape[0];
  return y_shape;
}

/// dy of x's shape with the last dim of w's rows (a GEMM's gradient arguments).
void linear_grad(const Tensor& dy, const Tensor& x, const Shape& w_shape, const char* op) {
  check_shape(dy, linear_output_shape(x, w_shape, op), (std::string(op) + ": dy").c_str());
}

/// x [..., h] with `param` [h]; returns h.
int64_t norm_width(const Tensor& x, const Tensor& param, const char* what, const char* param_what) {
  TPSP_CHECK(x.dim() >= 1, what, ": x must be [..., h], got ", shape_str(x.shape()));
  const int64_t h = x.size(-1);
  check_shape(param, {h}, param_what);
  return h;
}

/// rstd (or mean) [n] for the n rows of x [..., h].
void row_statistic(const Tensor& stat, const Tensor& x, int64_t h, const char* what) {
  check_shape(stat, {h == 0 ? 0 : x.numel() / h}, what);
}

void check_ids(const TokenBatch& ids, const char* what) {
  TPSP_CHECK(ids.b >= 0 && ids.s >= 0 && static_cast<int64_t>(ids.ids.size()) == ids.b * ids.s, what, ": ",
             ids.ids.size(), " ids do not fill [b, s] = [", ids.b, ", ", ids.s, "]");
}

void check_f32_gradient_buffer(const Tensor& buffer, const char* what, const char* name) {
  TPSP_CHECK(buffer.dtype() == DType::f32, what, ": the gradient buffer ", name, " is ",
             dtype_name(buffer.dtype()), "; gradients accumulate in f32 (a main_grad buffer)");
}

}  // namespace

void matmul_forward(const Tensor& x, const Tensor& w) {
  linear_output_shape(x, w.shape(), "matmul_forward");
}

void matmul_dgrad(const Tensor& dy, const Tensor& w) {
  TPSP_CHECK(dy.dim() >= 1 && w.dim() == 2 && dy.size(-1) == w.size(0),
             "matmul_dgrad: dy must be [..., m] and w [m, k], got dy ", shape_str(dy.shape()), " and w ",
             shape_str(w.shape()));
}

void matmul_wgrad(const Tensor& dy, const Tensor& x, const Tensor& dw) {
  TPSP_CHECK(dw.dtype() == DType::f32, "matmul_wgrad: the gradient buffer is ", dtype_name(dw.dtype()),
             "; gradients accumulate in f32 (a main_grad buffer)");
  linear_grad(dy, x, dw.shape(), "matmul_wgrad");
}

void matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w) {
  linear_grad(dy, x, w.shape(), "matmul_backward");
}

void bias_add_forward(const Tensor& y, const Tensor& b) {
  TPSP_CHECK(y.dim() >= 1 && b.dim() == 1 && y.size(-1) == b.size(0), "bias_add_forward: y ",
             shape_str(y.shape()), " needs a bias of its last dim, got b ", shape_str(b.shape()));
}

void bias_add_backward(const Tensor& dy) {
  TPSP_CHECK(dy.dim() >= 1, "bias_add_backward: dy must be [..., m], got ", shape_str(dy.shape()));
}

void add(const Tensor& a, const Tensor& b, const char* what) {
  check_same_shape(a, b, what);
}

void gelu_backward(const Tensor& dy, const Tensor& x) {
  check_same_shape(dy, x, "gelu_backward");
}

void layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
  const char* what = "layernorm_forward: gamma/beta";
  const int64_t h = norm_width(x, gamma, what, what);
  check_shape(beta, {h}, what);
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                        const Tensor& rstd) {
  const int64_t h = norm_width(x, gamma, "layernorm_backward: gamma", "layernorm_backward: gamma");
  check_same_shape(dy, x, "layernorm_backward: dy and x");
  row_statistic(mean, x, h, "layernorm_backward: mean");
  row_statistic(rstd, x, h, "layernorm_backward: rstd");
}

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps) {
  norm_width(x, weight, "rmsnorm_forward", "rmsnorm_forward: weight");
  TPSP_CHECK(std::isfinite(eps) && eps >= 0.f, "rmsnorm_forward: eps = ", eps,
             " must be a finite number >= 0");
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      const Tensor& dweight) {
  const int64_t h = norm_width(x, weight, "rmsnorm_backward", "rmsnorm_backward: weight");
  check_same_shape(dy, x, "rmsnorm_backward: dy and x");
  row_statistic(rstd, x, h, "rmsnorm_backward: rstd");
  check_shape(dweight, {h}, "rmsnorm_backward: dweight");
  check_f32_gradient_buffer(dweight, "rmsnorm_backward", "dweight");
}

void swiglu_forward(const Tensor& x) {
  TPSP_CHECK(x.dim() >= 1, "swiglu_forward: x must be [..., 2f], got ", shape_str(x.shape()));
  TPSP_CHECK(x.size(-1) % 2 == 0, "swiglu_forward: the last dim ", x.size(-1), " of x ", shape_str(x.shape()),
             " is odd; it must hold [gate | up], two halves of f");
}

void swiglu_backward(const Tensor& dy, const Tensor& x) {
  TPSP_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0, "swiglu_backward: x must be [..., 2f], got ",
             shape_str(x.shape()));
  Shape y_shape = x.shape();
  y_shape.back() /= 2;
  check_shape(dy, y_shape, "swiglu_backward: dy");
}

void rope(const Tensor& x, const std::vector<int64_t>& positions, int64_t d, float base, const char* what) {
  TPSP_CHECK(x.dim() == 3, what, ": x must be [s, b, n*d], got ", shape_str(x.shape()));
  TPSP_CHECK(d > 0 && d % 2 == 0, what, ": the head dim d = ", d,
             " must be positive and even (pairs rotate)");
  TPSP_CHECK(x.size(2) % d == 0, what, ": the last dim ", x.size(2), " of x ", shape_str(x.shape()),
             " is not a multiple of the head dim d = ", d);
  TPSP_CHECK(static_cast<int64_t>(positions.size()) == x.size(0), what, ": ", positions.size(),
             " positions for s = ", x.size(0), " rows");
  for (std::size_t r = 0; r < positions.size(); ++r)
    TPSP_CHECK(positions[r] >= 0, what, ": position ", positions[r], " of row ", r, " is negative");
  TPSP_CHECK(std::isfinite(base) && base > 0.f, what, ": base = ", base, " must be a finite number > 0");
}

void softmax_forward(const Tensor& x) {
  TPSP_CHECK(x.dim() >= 1, "softmax_forward: x must be [..., n], got ", shape_str(x.shape()));
}

void softmax_backward(const Tensor& dy, const Tensor& y) {
  check_same_shape(dy, y, "softmax_backward");
  TPSP_CHECK(y.dim() >= 1, "softmax_backward: y must be [..., n], got ", shape_str(y.shape()));
}

namespace {
AttentionDims attention_args(const Tensor& qkv, const AttentionOptions& opt, const char* what) {
  TPSP_CHECK(qkv.dim() == 3, what, ": qkv must be [s, b, groups*(heads/groups+2)*d], got ",
             shape_str(qkv.shape()));
  TPSP_CHECK(opt.heads >= 1, what, ": heads = ", opt.heads, " must be >= 1");
  TPSP_CHECK(opt.query_groups >= 0, what, ": query_groups = ", opt.query_groups, " must be >= 0 (0: heads)");
  const int64_t groups = opt.query_groups > 0 ? opt.query_groups : opt.heads;
  TPSP_CHECK(opt.heads % groups == 0, what, ": heads=", opt.heads,
             " is not divisible by query_groups=", groups,
             " (each key/value group serves heads/query_groups query heads)");
  const int64_t s = qkv.size(0), b = qkv.size(1), c = qkv.size(2), width = groups * (opt.heads / groups + 2);
  if (groups == opt.heads)
    TPSP_CHECK(c > 0 && c % width == 0, what, ": the last dim ", c, " of qkv ", shape_str(qkv.shape()),
               " is not a positive multiple of 3*heads = ", width);
  else
    TPSP_CHECK(c > 0 && c % width == 0, what, ": the last dim ", c, " of qkv ", shape_str(qkv.shape()),
               " is not a positive multiple of query_groups*(heads/query_groups+2) = ", groups, "*(",
               opt.heads, "/", groups, "+2) = ", width);
  if (opt.key_padding_mask.defined())
    check_shape(opt.key_padding_mask, {b, s}, "attention: key_padding_mask");
  if (!opt.cu_seqlens.empty()) {
    TPSP_CHECK(b == 1, what, ": packed sequences (cu_seqlens) need b = 1, got qkv ", shape_str(qkv.shape()));
    validate_cu_seqlens(opt.cu_seqlens, s, what);
  }
  if (opt.dropout_p > 0.f && s > 0 && b > 0) dropout({b, opt.heads, s, s}, opt.dropout_p, opt.dropout_key);
  return attention_dims(qkv, opt);
}
}  // namespace

AttentionDims attention_forward(const Tensor& qkv, const AttentionOptions& opt) {
  return attention_args(qkv, opt, "attention_forward");
}

AttentionDims attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                 const AttentionOptions& opt) {
  const AttentionDims D = attention_args(qkv, opt, "attention_backward");
  check_shape(dout, {D.s, D.b, D.heads * D.d}, "attention_backward: dout");
  check_shape(probs, {D.b, D.heads, D.s, D.s}, "attention_backward: probs");
  return D;
}

void embedding_forward(const TokenBatch& ids, const Tensor& wte) {
  check_ids(ids, "embedding_forward");
  TPSP_CHECK(wte.dim() == 2, "embedding_forward: wte must be [V_local, h], got ", shape_str(wte.shape()));
}

void embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local) {
  check_ids(ids, "embedding_backward");
  TPSP_CHECK(dout.dim() == 3 && dout.size(0) == ids.s && dout.size(1) == ids.b,
             "embedding_backward: dout must be [s, b, h] = [", ids.s, ", ", ids.b, ", h], got ",
             shape_str(dout.shape()));
  TPSP_CHECK(vocab_local >= 0, "embedding_backward: vocab_local ", vocab_local, " is negative");
}

void position_embedding_add(const Tensor& x, const Tensor& wpe, int64_t seq_start) {
  TPSP_CHECK(x.dim() == 3 && wpe.dim() == 2 && x.size(2) == wpe.size(1),
             "position_embedding_add: x must be [s, b, h] and wpe [max_seq, h], got x ", shape_str(x.shape()),
             " and wpe ", shape_str(wpe.shape()));
  const int64_t s = x.size(0), max_seq = wpe.size(0);
  TPSP_CHECK(seq_start >= 0 && seq_start + s <= max_seq, "position_embedding_add: positions [", seq_start,
             ", ", seq_start + s, ") are outside [0, ", max_seq, ") of wpe");
}

void position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start) {
  TPSP_CHECK(dx.dim() == 3, "position_embedding_backward: dx must be [s, b, h], got ", shape_str(dx.shape()));
  const int64_t s = dx.size(0);
  TPSP_CHECK(seq_start >= 0 && seq_start + s <= max_seq, "position_embedding_backward: positions [",
             seq_start, ", ", seq_start + s, ") are outside [0, ", max_seq, ")");
}

int64_t cross_entropy(const Tensor& logits, const std::vector<int64_t>& targets, float label_smoothing,
                      const char* what) {
  TPSP_CHECK(logits.dim() == 2, what, ": logits must be [n, V], got ", shape_str(logits.shape()));
  const int64_t n = logits.size(0), V = logits.size(1);
  TPSP_CHECK(static_cast<int64_t>(targets.size()) == n, what, ": ", targets.size(), " targets for ", n,
             " rows of logits ", shape_str(logits.shape()));
  TPSP_CHECK(label_smoothing >= 0.f && label_smoothing <= 1.f, what, ": label_smoothing ", label_smoothing,
             " is outside [0, 1]");
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = targets[static_cast<std::size_t>(i)];
    TPSP_CHECK(t == kIgnoreIndex || (t >= 0 && t < V), what, ": target ", t, " at row ", i,
               " is outside [0, ", V, ") and is not ignore_index ", kIgnoreIndex);
  }
  return counted_rows(targets);
}

DropoutGeometry dropout(const Shape& local_shape, float p, const DropoutKey& key) {
  TPSP_CHECK(p >= 0.f && p < 1.f, "dropout: p = ", p, " is outside [0, 1)");
  const std::size_t nd = local_shape.size();
  DropoutGeometry g;
  g.global = key.global_shape.empty() ? local_shape : key.global_shape;
  g.offset = key.offset.empty() ? Shape(nd, 0) : key.offset;
  TPSP_CHECK(g.global.size() == nd && g.offset.size() == nd, "dropout: local shape ", shape_str(local_shape),
             ", offset ", shape_str(g.offset), " and global shape ", shape_str(g.global), " differ in rank");
  for (std::size_t d = 0; d < nd; ++d)
    TPSP_CHECK(local_shape[d] >= 0 && g.offset[d] >= 0 && g.offset[d] + local_shape[d] <= g.global[d],
               "dropout: a local tensor ", shape_str(local_shape), " at offset ", shape_str(g.offset),
               " does not fit inside the global shape ", shape_str(g.global), " (dim ", d, ")");
  g.gstride.assign(nd, 1);
  for (std::size_t d = nd; d-- > 1;) g.gstride[d - 1] = g.gstride[d] * g.global[d];
  g.keep_value = 1.f / (1.f - p);
  return g;
}

void adamw_step(const Tensor& param, const Tensor& grad, const AdamWState& state, int64_t t) {
  TPSP_CHECK(t >= 1, "adamw_step: step t = ", t, " must be >= 1 (1-based)");
  check_same_shape(param, grad, "adamw_step: param and grad");
  if (state.m.defined()) check_same_shape(param, state.m, "adamw_step: param and state.m");
  if (state.v.defined()) check_same_shape(param, state.v, "adamw_step: param and state.v");
  TPSP_CHECK(param.raw_data() != grad.raw_data(), "adamw_step: grad must not share the parameter's storage");
}

}  // namespace rules
}  // namespace tpsp::ops
