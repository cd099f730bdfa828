// Causal multi-head (and grouped-query) self-attention on [s, b, G·(heads/G + 2)·d] with per-group
// [q… | k | v] blocks (engine/ops/attention.h).
//
// For one (batch bi, head) pair, Q, K and V (K and V those of the head's group) are s×d matrices inside
// qkv whose rows are b·G·(heads/G + 2)·d floats apart, so every product is one strided sgemm, no copies:
//   S = Q·Kᵀ/√d (masked: key j > query i, a padded key, or with cu_seqlens a key of another packed
//   sequence: key j < the first token of query i's sequence) → P = softmax(S) → P' = P ⊙ M_drop
//   O = P'·V
// Backward (the mirror):
//   dV = P'ᵀ·dO;  dP' = dO·Vᵀ;  dP = dP' ⊙ M_drop;  dS = P ⊙ (dP − rowsum(dP ⊙ P));
//   dQ = dS·K/√d;  dK = dSᵀ·Q/√d;  a group's dK and dV summed over its query heads (β = 1).
// The dropout mask is regenerated from the key in backward (never stored).
#include <cblas.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/ops/cpu/cpu_ops.h"
#include "engine/ops/cpu/fast_math.h"
#include "engine/ops/rules.h"

namespace tpsp::ops::cpu {
namespace {

/// C[M, N] = alpha · op(A) · op(B) + beta · C, row-major with explicit leading dimensions.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, float beta = 0.f) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda),
              B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

}  // namespace

AttentionOut CpuOps::attention_forward(const Tensor& qkv, const AttentionOptions& opt) {
  const AttentionDims D = attention_dims(qkv, opt);
  const int64_t s = D.s, d = D.d, ld = D.ld_qkv(), ldo = D.ld_out();
  AttentionOut res{Tensor({s, D.b, D.heads * d}), Tensor({D.b, D.heads, s, s})};
  if (s == 0 || D.b == 0) return res;
  const bool drop = opt.dropout_p > 0.f;
  const Tensor mask =
      drop ? ops::dropout_mask({D.b, D.heads, s, s}, opt.dropout_p, opt.dropout_key) : Tensor();
  const bool padded = opt.key_padding_mask.defined();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const std::vector<int64_t> first = first_visible_key(opt, s);
  std::vector<float> dropped(drop ? static_cast<std::size_t>(s * s) : 0);
  for (int64_t bi = 0; bi < D.b; ++bi) {
    const float* key_ok = padded ? opt.key_padding_mask.data() + bi * s : nullptr;
    for (int64_t h = 0; h < D.heads; ++h) {
      const float* q = qkv.data() + D.q_offset(bi, h);
      const float* k = qkv.data() + D.k_offset(bi, h);
      const float* v = qkv.data() + D.v_offset(bi, h);
      float* P = res.probs.data() + (bi * D.heads + h) * s * s;
      gemm(false, true, s, s, d, scale, q, ld, k, ld, P, s);  // S = Q·Kᵀ/√d
      for (int64_t i = 0; i < s; ++i) {                       // masked, stable softmax per query row
        float* row = P + i * s;
        float mx = neg_inf;
        const int64_t j0 = first[static_cast<std::size_t>(i)];
        for (int64_t j = 0; j < s; ++j) {
          const bool visible = j0 <= j && j <= i && (!key_ok || key_ok[j] != 0.f);
          row[j] = visible ? row[j] : neg_inf;
          mx = row[j] > mx ? row[j] : mx;  // std::fmax without its libm call: mx is never NaN
        }
        if (mx == neg_inf) {  // no visible key: a zero row (and a zero output)
          for (int64_t j = 0; j < s; ++j) row[j] = 0.f;
          continue;
        }
        exp_shifted(row, s, mx);
        double sum = 0.0;
        for (int64_t j = 0; j < s; ++j) sum += row[j];
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t j = 0; j < s; ++j) row[j] *= inv;
      }
      const float* Pv = P;
      if (drop) {
        const float* M = mask.data() + (bi * D.heads + h) * s * s;
        for (int64_t i = 0; i < s * s; ++i) dropped[static_cast<std::size_t>(i)] = P[i] * M[i];
        Pv = dropped.data();
      }
      float* o = res.out.data() + bi * D.heads * d + h * d;
      gemm(false, false, s, d, s, 1.f, Pv, s, v, ld, o, ldo);  // O = P'·V
    }
  }
  return res;
}

Tensor CpuOps::attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                  const AttentionOptions& opt) {
  const AttentionDims D = attention_dims(qkv, opt);
  const int64_t s = D.s, d = D.d, ld = D.ld_qkv(), ldo = D.ld_out();
  Tensor dqkv(qkv.shape());
  if (s == 0 || D.b == 0) return dqkv;
  const bool drop = opt.dropout_p > 0.f;
  const Tensor mask =
      drop ? ops::dropout_mask({D.b, D.heads, s, s}, opt.dropout_p, opt.dropout_key) : Tensor();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  std::vector<float> dropped(drop ? static_cast<std::size_t>(s * s) : 0);
  std::vector<float> dP(static_cast<std::size_t>(s * s));
  for (int64_t bi = 0; bi < D.b; ++bi) {
    for (int64_t h = 0; h < D.heads; ++h) {
      const float* q = qkv.data() + D.q_offset(bi, h);
      const float* k = qkv.data() + D.k_offset(bi, h);
      const float* v = qkv.data() + D.v_offset(bi, h);
      float* dq = dqkv.data() + D.q_offset(bi, h);
      float* dk = dqkv.data() + D.k_offset(bi, h);
      float* dv = dqkv.data() + D.v_offset(bi, h);
      const float acc = h % D.per_group() == 0 ? 0.f : 1.f;  // a group's dK, dV: the sum over its heads
      const float* dO = dout.data() + bi * D.heads * d + h * d;
      const float* P = probs.data() + (bi * D.heads + h) * s * s;
      const float* M = drop ? mask.data() + (bi * D.heads + h) * s * s : nullptr;
      const float* Pv = P;
      if (drop) {
        for (int64_t i = 0; i < s * s; ++i) dropped[static_cast<std::size_t>(i)] = P[i] * M[i];
        Pv = dropped.data();
      }
      gemm(true, false, s, d, s, 1.f, Pv, s, dO, ldo, dv, ld, acc);   // dV (+)= P'ᵀ·dO
      gemm(false, true, s, s, d, 1.f, dO, ldo, v, ld, dP.data(), s);  // dP' = dO·Vᵀ
      for (int64_t i = 0; i < s; ++i) {                               // dS = P ⊙ (dP − Σ_j dP·P)
        float* row = dP.data() + i * s;
        const float* prow = P + i * s;
        if (drop)
          for (int64_t j = 0; j < s; ++j) row[j] *= M[i * s + j];
        double dot = 0.0;
        for (int64_t j = 0; j < s; ++j) dot += static_cast<double>(row[j]) * prow[j];
        const float fdot = static_cast<float>(dot);
        for (int64_t j = 0; j < s; ++j) row[j] = prow[j] * (row[j] - fdot);
      }
      gemm(false, false, s, d, s, scale, dP.data(), s, k, ld, dq, ld);      // dQ = dS·K/√d
      gemm(true, false, s, d, s, scale, dP.data(), s, q, ld, dk, ld, acc);  // dK (+)= dSᵀ·Q/√d
    }
  }
  return dqkv;
}

}  // namespace tpsp::ops::cpu
