// The argument rules of every op, once, above the devices: engine/ops/dispatch.cpp checks them before
// any device code runs, so a bad call raises the same ShapeError, with the same message, on every
// device, and the kernels (engine/ops/cpu/, engine/ops/cuda/) only compute. Each rule is named after
// its op (rules::layernorm_forward checks what ops::layernorm_forward documents in its header); a
// rule returns the sizes that it established when the kernels need them. The geometry that both
// kernels derive from checked arguments (attention's sizes, a packed sequence's first key, a dropout
// tensor's place in the whole one, AdamW's scalars) lives here too, so that no device restates it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/ops/adamw.h"
#include "engine/ops/adamw_scalars.h"
#include "engine/ops/attention.h"
#include "engine/ops/dropout.h"
#include "engine/tensor.h"
#include "engine/tokens.h"

namespace tpsp::ops {

/// Rows of a [..., k] tensor flattened to a matrix: numel / last dim (0 when the last dim is 0).
int64_t leading_rows(const Tensor& t);

/// The sizes of one attention call: qkv [s, b, groups·(per_group + 2)·d] (per_group = heads / groups
/// query heads, then the group's k and v), out [s, b, heads·d], probs [b, heads, s, s].
struct AttentionDims {
  int64_t s, b, heads, d, groups;
  int64_t per_group() const { return heads / groups; }           // query heads per group
  int64_t group_width() const { return (per_group() + 2) * d; }  // one group's [q… | k | v]
  int64_t ld_qkv() const { return b * groups * group_width(); }  // row stride of Q, K, V (and dQ…)
  int64_t ld_out() const { return b * heads * d; }               // row stride of O (and dO)
  /// Offsets in one row of qkv of query head h's q, and of its group's k and v.
  int64_t q_offset(int64_t bi, int64_t h) const {
    return (bi * groups + h / per_group()) * group_width() + (h % per_group()) * d;
  }
  int64_t k_offset(int64_t bi, int64_t h) const {
    return (bi * groups + h / per_group()) * group_width() + per_group() * d;
  }
  int64_t v_offset(int64_t bi, int64_t h) const { return k_offset(bi, h) + d; }
};
/// The sizes of checked attention arguments (rules::attention_forward established them).
AttentionDims attention_dims(const Tensor& qkv, const AttentionOptions& opt);
/// first[i]: the first key query i may see — the start of its packed sequence, or 0 without packing.
std::vector<int64_t> first_visible_key(const AttentionOptions& opt, int64_t s);

/// Where a local dropout tensor sits in the whole one (DropoutKey with its defaults filled in): the
/// offset and global shape, the global row-major strides, and the value of a kept element, 1/(1−p).
struct DropoutGeometry {
  Shape offset;
  Shape global;
  std::vector<int64_t> gstride;
  float keep_value = 1.f;
};

/// The scalars of AdamW's step t under cfg (adamw_scalars.h).
AdamWScalars adamw_scalars(const AdamWConfig& cfg, int64_t t);

/// The rotation of rotary position embedding (rope.h) for rows at `positions`: cos and sin of p·θ_i,
/// θ_i = base^(−2i/d), i < d/2, row-major [positions.size(), d/2], each angle and its cos/sin in double and
/// rounded once, so every device rotates by the same floats. `sign` −1 gives the opposite angles (backward).
struct RopeTable {
  std::vector<float> cos, sin;
};
RopeTable rope_table(const std::vector<int64_t>& positions, int64_t d, float base, int sign);

/// The rows a cross entropy counts: targets other than kIgnoreIndex.
int64_t counted_rows(const std::vector<int64_t>& targets);

/// The messages of the value errors that only a kernel can see (NaN or infinite logits or losses),
/// written once for every device.
NumericError bad_logit_error(const char* what, float value, int64_t row, int64_t col);
NumericError infinite_loss_error(const char* what, int64_t row, int64_t target, double loss);
NumericError no_finite_logit_error(const char* what, int64_t row, double lse);

namespace rules {

// Each throws ShapeError naming the op, the rule and the values, as its op's header documents.
void matmul_forward(const Tensor& x, const Tensor& w);
void matmul_dgrad(const Tensor& dy, const Tensor& w);
void matmul_wgrad(const Tensor& dy, const Tensor& x, const Tensor& dw);
void matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w);
void bias_add_forward(const Tensor& y, const Tensor& b);
void bias_add_backward(const Tensor& dy);

void add(const Tensor& a, const Tensor& b, const char* what);  // "add" or "add_"
void gelu_backward(const Tensor& dy, const Tensor& x);

void layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta);
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                        const Tensor& rstd);
void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps);
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      const Tensor& dweight);

void swiglu_forward(const Tensor& x);
void swiglu_backward(const Tensor& dy, const Tensor& x);
/// x [s, b, n·d], d even, s positions ≥ 0, base finite and > 0; `what` is "rope_forward" or "rope_backward".
void rope(const Tensor& x, const std::vector<int64_t>& positions, int64_t d, float base, const char* what);

void softmax_forward(const Tensor& x);
void softmax_backward(const Tensor& dy, const Tensor& y);

/// qkv [s, b, groups·(heads/groups + 2)·d] (heads·3·d without GQA; heads % groups == 0) with its options
/// (padding mask [b, s]; cu_seqlens valid for s with b = 1; with dropout, the probabilities [b, heads, s, s]
/// inside the key's global shape: rules::dropout).
AttentionDims attention_forward(const Tensor& qkv, const AttentionOptions& opt);
AttentionDims attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                 const AttentionOptions& opt);

void embedding_forward(const TokenBatch& ids, const Tensor& wte);
void embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local);
void position_embedding_add(const Tensor& x, const Tensor& wpe, int64_t seq_start);
void position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start);

/// logits [n, V], n targets in [0, V) or kIgnoreIndex, α ∈ [0, 1]; returns the number of counted rows.
int64_t cross_entropy(const Tensor& logits, const std::vector<int64_t>& targets, float label_smoothing,
                      const char* what);

/// p ∈ [0, 1) and a local shape that fits inside the key's global shape at its offset.
DropoutGeometry dropout(const Shape& local_shape, float p, const DropoutKey& key);

/// t ≥ 1; param, grad and the state (when defined) of one shape; grad not the parameter's storage.
void adamw_step(const Tensor& param, const Tensor& grad, const AdamWState& state, int64_t t);

}  // namespace rules
}  // namespace tpsp::ops
