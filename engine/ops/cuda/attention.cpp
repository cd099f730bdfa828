// Causal multi-head attention on the GPU: the CPU's algorithm (engine/ops/cpu/attention.cpp) with
// every per-(batch, head) product of a pass as one strided batched GEMM. Block z = bi·heads + head
// of qkv starts at z·3d (rows b·heads·3d apart), its probabilities at z·s·s, its output at z·d:
//   S = Q·Kᵀ/√d → mask + softmax (rows.cu) → P' = P ⊙ M_drop → O = P'·V
// Backward: dV = P'ᵀ·dO; dP' = dO·Vᵀ; dP = dP' ⊙ M_drop; dS = P ⊙ (dP − rowsum(dP ⊙ P));
//           dQ = dS·K/√d; dK = dSᵀ·Q/√d.
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
  const int64_t s = D.s, d = D.d, ld = D.ld_qkv(), ldo = D.ld_out();
  ops::AttentionOut res{Tensor({s, D.b, D.heads * d}, DType::f32, Device::cuda),
                        Tensor({D.b, D.heads, s, s}, DType::f32, Device::cuda)};
  if (s == 0 || D.b == 0) return res;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const float* q = dptr(qkv, "attention_forward");
  float* P = dptr(res.probs, "attention_forward");
  gemm_batched(false, true, s, s, d, scale, q, ld, 3 * d, q + d, ld, 3 * d, 0.f, P, s, s * s,
               D.batch());  // S
  const Tensor key_ok =
      opt.key_padding_mask.defined() ? opt.key_padding_mask.to(DType::f32).to(Device::cuda) : Tensor();
  const DeviceArray<int64_t> first(ops::first_visible_key(opt, s));
  kernels::attention_softmax(P, D.b, D.heads, s,
                             key_ok.defined() ? dptr(key_ok, "attention_forward") : nullptr, first.get());
  const Tensor Pv = dropped_probs(res.probs, opt);
  gemm_batched(false, false, s, d, s, 1.f, dptr(Pv, "attention_forward"), s, s * s, q + 2 * d, ld, 3 * d, 0.f,
               dptr(res.out, "attention_forward"), ldo, d, D.batch());  // O = P'·V
  return res;
}

Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                          const ops::AttentionOptions& opt) {
  const ops::AttentionDims D = ops::attention_dims(qkv, opt);
  const int64_t s = D.s, d = D.d, ld = D.ld_qkv(), ldo = D.ld_out();
  Tensor dqkv(qkv.shape(), DType::f32, Device::cuda);
  if (s == 0 || D.b == 0) return dqkv;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const float* q = dptr(qkv, "attention_backward");
  const float* dO = dptr(dout, "attention_backward");
  float* dq = dptr(dqkv, "attention_backward");
  const Tensor Pv = dropped_probs(probs, opt);
  Tensor dP = Tensor::empty(probs.shape(), DType::f32, Device::cuda);
  float* dp = dptr(dP, "attention_backward");
  const int64_t z = D.batch();
  gemm_batched(true, false, s, d, s, 1.f, dptr(Pv, "attention_backward"), s, s * s, dO, ldo, d, 0.f,
               dq + 2 * d, ld, 3 * d, z);  // dV = P'ᵀ·dO
  gemm_batched(false, true, s, s, d, 1.f, dO, ldo, d, q + 2 * d, ld, 3 * d, 0.f, dp, s, s * s,
               z);  // dP' = dO·Vᵀ
  if (opt.dropout_p > 0.f)
    kernels::dropout_apply(dp, dp, dP.numel(),
                           make_dropout_index(probs.shape(), opt.dropout_p, opt.dropout_key));
  kernels::attention_softmax_backward(dp, dptr(probs, "attention_backward"), z * s, s);  // dS
  gemm_batched(false, false, s, d, s, scale, dp, s, s * s, q + d, ld, 3 * d, 0.f, dq, ld, 3 * d,
               z);  // dQ = dS·K/√d
  gemm_batched(true, false, s, d, s, scale, dp, s, s * s, q, ld, 3 * d, 0.f, dq + d, ld, 3 * d,
               z);  // dK = dSᵀ·Q/√d
  return dqkv;
}

}  // namespace tpsp::cuda
