// Causal multi-head (and grouped-query) attention on the GPU: the CPU's algorithm
// (engine/ops/cpu/attention.cpp) with the products of a pass as strided batched GEMMs. With Q = heads/G
// query heads per group, one batched GEMM per j < Q covers head g·Q + j of every (batch, group) pair
// z = bi·G + g: its q starts at z·(Q+2)d + j·d and the group's k, v at z·(Q+2)d + Q·d, + (Q+1)·d (rows
// b·G·(Q+2)·d apart), its probabilities at (z·Q + j)·s·s, its output at (z·Q + j)·d:
//   S = Q·Kᵀ/√d → mask + softmax (rows.cu) → P' = P ⊙ M_drop → O = P'·V
// Backward: dV = P'ᵀ·dO; dP' = dO·Vᵀ; dP = dP' ⊙ M_drop; dS = P ⊙ (dP − rowsum(dP ⊙ P));
//           dQ = dS·K/√d; dK = dSᵀ·Q/√d; a group's dK and dV accumulate over j (β = 1 for j > 0).
#include "engine/ops/cuda/attention.h"

#include <cmath>
#include <vector>

#include "engine/error.h"
#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/gemm.h"
#include "engine/ops/cuda/kernels.h"
#include "engine/ops/cuda/op_args.h"
#include "engine/ops/rules.h"

namespace tpsp::cuda {
namespace {

/// P' = P ⊙ M_drop into a fresh tensor, or P itself without dropout.
Tensor dropped_probs(const Tensor& probs, const ops::AttentionOptions& opt) {
  if (opt.dropout_p <= 0.f) return probs;
  Tensor out = Tensor::empty(probs.shape(), DType::f32, Device::cuda);
  kernels::dropout_apply(dptr(out, "attention"), dptr(probs, "attention"), probs.numel(),
                         make_dropout_index(probs.shape(), opt.dropout_p, opt.dropout_key));
  return out;
}

}  // namespace

ops::AttentionOut attention_forward(const Tensor& qkv, const ops::AttentionOptions& opt) {
  const ops::AttentionDims D = ops::attention_dims(qkv, opt);
  const int64_t s = D.s, d = D.d, ld = D.ld_qkv(), ldo = D.ld_out(), Q = D.per_group(), w = D.group_width();
  const int64_t z = D.b * D.groups;
  ops::AttentionOut res{Tensor({s, D.b, D.heads * d}, DType::f32, Device::cuda),
                        Tensor({D.b, D.heads, s, s}, DType::f32, Device::cuda)};
  if (s == 0 || D.b == 0) return res;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const float* qkv_p = dptr(qkv, "attention_forward");
  float* P = dptr(res.probs, "attention_forward");
  for (int64_t j = 0; j < Q; ++j)  // S = Q·Kᵀ/√d
    gemm_batched(false, true, s, s, d, scale, qkv_p + j * d, ld, w, qkv_p + Q * d, ld, w, 0.f, P + j * s * s,
                 s, Q * s * s, z);
  const Tensor key_ok =
      opt.key_padding_mask.defined() ? opt.key_padding_mask.to(DType::f32).to(Device::cuda) : Tensor();
  const DeviceArray<int64_t> first(ops::first_visible_key(opt, s));
  kernels::attention_softmax(P, D.b, D.heads, s,
                             key_ok.defined() ? dptr(key_ok, "attention_forward") : nullptr, first.get());
  const Tensor Pv = dropped_probs(res.probs, opt);
  const float* pv = dptr(Pv, "attention_forward");
  float* out = dptr(res.out, "attention_forward");
  for (int64_t j = 0; j < Q; ++j)  // O = P'·V
    gemm_batched(false, false, s, d, s, 1.f, pv + j * s * s, s, Q * s * s, qkv_p + (Q + 1) * d, ld, w, 0.f,
                 out + j * d, ldo, Q * d, z);
  return res;
}

Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                          const ops::AttentionOptions& opt) {
  const ops::AttentionDims D = ops::attention_dims(qkv, opt);
  const int64_t s = D.s, d = D.d, ld = D.ld_qkv(), ldo = D.ld_out(), Q = D.per_group(), w = D.group_width();
  const int64_t z = D.b * D.groups;
  Tensor dqkv(qkv.shape(), DType::f32, Device::cuda);
  if (s == 0 || D.b == 0) return dqkv;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const float* q = dptr(qkv, "attention_backward");
  const float* k = q + Q * d;
  const float* v = q + (Q + 1) * d;
  const float* dO = dptr(dout, "attention_backward");
  float* dq = dptr(dqkv, "attention_backward");
  float* dk = dq + Q * d;
  float* dv = dq + (Q + 1) * d;
  const Tensor Pv = dropped_probs(probs, opt);
  const float* pv = dptr(Pv, "attention_backward");
  Tensor dP = Tensor::empty(probs.shape(), DType::f32, Device::cuda);
  float* dp = dptr(dP, "attention_backward");
  for (int64_t j = 0; j < Q; ++j) {
    const float acc = j == 0 ? 0.f : 1.f;
    gemm_batched(true, false, s, d, s, 1.f, pv + j * s * s, s, Q * s * s, dO + j * d, ldo, Q * d, acc, dv, ld,
                 w,
                 z);  // dV (+)= P'ᵀ·dO
    gemm_batched(false, true, s, s, d, 1.f, dO + j * d, ldo, Q * d, v, ld, w, 0.f, dp + j * s * s, s,
                 Q * s * s,
                 z);  // dP' = dO·Vᵀ
  }
  if (opt.dropout_p > 0.f)
    kernels::dropout_apply(dp, dp, dP.numel(),
                           make_dropout_index(probs.shape(), opt.dropout_p, opt.dropout_key));
  kernels::attention_softmax_backward(dp, dptr(probs, "attention_backward"), D.b * D.heads * s, s);  // dS
  for (int64_t j = 0; j < Q; ++j) {
    gemm_batched(false, false, s, d, s, scale, dp + j * s * s, s, Q * s * s, k, ld, w, 0.f, dq + j * d, ld, w,
                 z);  // dQ = dS·K/√d
    gemm_batched(true, false, s, d, s, scale, dp + j * s * s, s, Q * s * s, q + j * d, ld, w,
                 j == 0 ? 0.f : 1.f, dk, ld, w, z);  // dK (+)= dSᵀ·Q/√d
  }
  return dqkv;
}

}  // namespace tpsp::cuda
