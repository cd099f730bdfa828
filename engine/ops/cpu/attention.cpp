// Causal multi-head self-attention on [s, b, heads·3·d] with per-head [q|k|v] blocks.
//
// For one (batch bi, head) pair, Q, K and V are s×d matrices inside qkv whose rows are b·3·heads·d
// floats apart, so every product is one strided sgemm (lda = b·3·heads·d), no copies:
//   S = Q·Kᵀ/√d (masked: key j > query i, a padded key, or with cu_seqlens a key of another packed
//   sequence: key j < the first token of query i's sequence) → P = softmax(S) → P' = P ⊙ M_drop
//   O = P'·V
// Backward (the mirror):
//   dV = P'ᵀ·dO;  dP' = dO·Vᵀ;  dP = dP' ⊙ M_drop;  dS = P ⊙ (dP − rowsum(dP ⊙ P));
//   dQ = dS·K/√d;  dK = dSᵀ·Q/√d.
// The dropout mask is regenerated from the key in backward (never stored).
#include "engine/ops/attention.h"

#include <cblas.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/error.h"
#include "engine/ops/cpu/fast_math.h"
#include "engine/ops/cpu/ops.h"
#include "engine/packed_seq.h"

namespace tpsp::ops::cpu {
namespace {

/// C[M, N] = alpha · op(A) · op(B), row-major with explicit leading dimensions; C is overwritten.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda),
              B, static_cast<int>(ldb), 0.f, C, static_cast<int>(ldc));
}

/// The sizes of one call: qkv [s, b, heads·3·d].
struct Dims {
  int64_t s, b, heads, d;
  int64_t ld_qkv() const { return b * heads * 3 * d; }  // row stride of Q, K, V (and dQ, dK, dV)
  int64_t ld_out() const { return b * heads * d; }      // row stride of O (and dO)
};

Dims check_attention_args(const Tensor& qkv, const AttentionOptions& opt, const char* what) {
  TPSP_CHECK(qkv.dim() == 3, what, ": qkv must be [s, b, heads*3*d], got ", shape_str(qkv.shape()));
  TPSP_CHECK(opt.heads >= 1, what, ": heads = ", opt.heads, " must be >= 1");
  const int64_t s = qkv.size(0), b = qkv.size(1), c = qkv.size(2);
  TPSP_CHECK(c > 0 && c % (3 * opt.heads) == 0, what, ": the last dim ", c, " of qkv ",
             shape_str(qkv.shape()), " is not a positive multiple of 3*heads = ", 3 * opt.heads);
  if (opt.key_padding_mask.defined())
    check_shape(opt.key_padding_mask, {b, s}, "attention: key_padding_mask");
  if (!opt.cu_seqlens.empty()) {
    TPSP_CHECK(b == 1, what, ": packed sequences (cu_seqlens) need b = 1, got qkv ", shape_str(qkv.shape()));
    validate_cu_seqlens(opt.cu_seqlens, s, what);
  }
  return Dims{s, b, opt.heads, c / (3 * opt.heads)};
}

/// first[i]: the first key query i may see — the start of its packed sequence, or 0 without packing.
std::vector<int64_t> first_visible_key(const AttentionOptions& opt, int64_t s) {
  std::vector<int64_t> first(static_cast<std::size_t>(s), 0);
  for (std::size_t k = 0; k + 1 < opt.cu_seqlens.size(); ++k)
    for (int64_t i = opt.cu_seqlens[k]; i < opt.cu_seqlens[k + 1]; ++i)
      first[static_cast<std::size_t>(i)] = opt.cu_seqlens[k];
  return first;
}

}  // namespace

AttentionOut attention_forward(const Tensor& qkv, const AttentionOptions& opt) {
  const Dims D = check_attention_args(qkv, opt, "attention_forward");
  const int64_t s = D.s, d = D.d, ld = D.ld_qkv(), ldo = D.ld_out();
  AttentionOut res{Tensor({s, D.b, D.heads * d}), Tensor({D.b, D.heads, s, s})};
  if (s == 0 || D.b == 0) return res;
  const bool drop = opt.dropout_p > 0.f;
  const Tensor mask =
      drop ? cpu::dropout_mask({D.b, D.heads, s, s}, opt.dropout_p, opt.dropout_key) : Tensor();
  const bool padded = opt.key_padding_mask.defined();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const std::vector<int64_t> first = first_visible_key(opt, s);
  std::vector<float> dropped(drop ? static_cast<std::size_t>(s * s) : 0);
  for (int64_t bi = 0; bi < D.b; ++bi) {
    const float* key_ok = padded ? opt.key_padding_mask.data() + bi * s : nullptr;
    for (int64_t h = 0; h < D.heads; ++h) {
      const float* q = qkv.data() + bi * D.heads * 3 * d + h * 3 * d;
      const float* k = q + d;
      const float* v = q + 2 * d;
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

Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                          const AttentionOptions& opt) {
  const Dims D = check_attention_args(qkv, opt, "attention_backward");
  const int64_t s = D.s, d = D.d, ld = D.ld_qkv(), ldo = D.ld_out();
  check_shape(dout, {s, D.b, D.heads * d}, "attention_backward: dout");
  check_shape(probs, {D.b, D.heads, s, s}, "attention_backward: probs");
  Tensor dqkv(qkv.shape());
  if (s == 0 || D.b == 0) return dqkv;
  const bool drop = opt.dropout_p > 0.f;
  const Tensor mask =
      drop ? cpu::dropout_mask({D.b, D.heads, s, s}, opt.dropout_p, opt.dropout_key) : Tensor();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  std::vector<float> dropped(drop ? static_cast<std::size_t>(s * s) : 0);
  std::vector<float> dP(static_cast<std::size_t>(s * s));
  for (int64_t bi = 0; bi < D.b; ++bi) {
    for (int64_t h = 0; h < D.heads; ++h) {
      const int64_t qkv_off = bi * D.heads * 3 * d + h * 3 * d;
      const float* q = qkv.data() + qkv_off;
      const float* k = q + d;
      const float* v = q + 2 * d;
      float* dq = dqkv.data() + qkv_off;
      float* dk = dq + d;
      float* dv = dq + 2 * d;
      const float* dO = dout.data() + bi * D.heads * d + h * d;
      const float* P = probs.data() + (bi * D.heads + h) * s * s;
      const float* M = drop ? mask.data() + (bi * D.heads + h) * s * s : nullptr;
      const float* Pv = P;
      if (drop) {
        for (int64_t i = 0; i < s * s; ++i) dropped[static_cast<std::size_t>(i)] = P[i] * M[i];
        Pv = dropped.data();
      }
      gemm(true, false, s, d, s, 1.f, Pv, s, dO, ldo, dv, ld);        // dV = P'ᵀ·dO
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
      gemm(false, false, s, d, s, scale, dP.data(), s, k, ld, dq, ld);  // dQ = dS·K/√d
      gemm(true, false, s, d, s, scale, dP.data(), s, q, ld, dk, ld);   // dK = dSᵀ·Q/√d
    }
  }
  return dqkv;
}

}  // namespace tpsp::ops::cpu
