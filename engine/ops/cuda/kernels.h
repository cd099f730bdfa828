// The launchers of the GPU backend's kernels (engine/ops/cuda/*.cu): plain device pointers, row-major
// f32, the legacy default stream; each throws std::runtime_error naming the kernel if its launch
// fails. Shapes are checked by the callers (cuda_ops.cpp, attention.cpp), which document the ops;
// the semantics are engine/ops/cpu's, file for file (named beside each group).
#pragma once

#include <cstdint>

#include "engine/ops/adamw_scalars.h"
#include "engine/ops/cuda/dropout_index.h"

namespace tpsp::cuda::kernels {

// ---- elementwise.cu (engine/ops/cpu/elementwise.cpp, gelu.cpp, matmul.cpp's bias, adamw.cpp, dropout.cpp)
/// out[i] = a[i] + b[i], i < n.
void add(float* out, const float* a, const float* b, int64_t n);
/// a[i] += b[i].
void add_inplace(float* a, const float* b, int64_t n);
/// a[i] *= s.
void scale_inplace(float* a, float s, int64_t n);
/// y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
void gelu_forward(float* y, const float* x, int64_t n);
/// dx = dy · gelu'(x).
void gelu_backward(float* dx, const float* dy, const float* x, int64_t n);
/// y[r, j] += b[j] for a [rows, m] matrix.
void bias_add(float* y, const float* b, int64_t rows, int64_t m);
/// db[j] = Σ_r dy[r, j], accumulated in double in row order, rounded once.
void bias_grad(float* db, const float* dy, int64_t rows, int64_t m);
/// y[i] = x[i] · mask(i) for the local element i of `index` (y may be x).
void dropout_apply(float* y, const float* x, int64_t n, const DropoutIndex& index);

using ops::AdamWScalars;  // engine/ops/adamw_scalars.h: formed once on the host for every device
/// One AdamW update of n elements in the CPU's order of IEEE operations (no contraction into FMAs
/// other than the CPU's two std::fma).
void adamw(float* p, float* m, float* v, const float* g, int64_t n, const AdamWScalars& k);

// ---- llama.cu (engine/ops/cpu/swiglu.cpp, rope.cpp)
/// y [rows, f] = silu(gate)·up for x [rows, 2f] = [gate | up].
void swiglu_forward(float* y, const float* x, int64_t rows, int64_t f);
/// dx [rows, 2f] = [dy·up·silu'(gate) | dy·silu(gate)].
void swiglu_backward(float* dx, const float* dy, const float* x, int64_t rows, int64_t f);
/// y [s, b, heads·d] = x rotated pairwise by the [s, d/2] cos/sin table (on the device).
void rope_rotate(float* y, const float* x, const float* cos, const float* sin, int64_t s, int64_t b,
                 int64_t heads, int64_t d);

// ---- embedding.cu (engine/ops/cpu/embedding.cpp)
/// out [s, b, h] = wte[ids[bi, si] − vocab_start] or 0 outside [0, v_local); ids [b, s] on the device.
void embedding_forward(float* out, const int64_t* ids, const float* wte, int64_t b, int64_t s, int64_t h,
                       int64_t v_local, int64_t vocab_start);
/// dwte [v_local, h] (zeroed) += dout rows onto their ids, in (si, bi) order per column.
void embedding_backward(float* dwte, const float* dout, const int64_t* ids, int64_t b, int64_t s, int64_t h,
                        int64_t v_local, int64_t vocab_start);
/// x [s, b, h] += wpe[seq_start + si].
void position_add(float* x, const float* wpe, int64_t s, int64_t b, int64_t h, int64_t seq_start);
/// dwpe (zeroed) rows seq_start + si = Σ_b dx[si, b, :], in b order.
void position_backward(float* dwpe, const float* dx, int64_t s, int64_t b, int64_t h, int64_t seq_start);

// ---- rows.cu (engine/ops/cpu/layernorm.cpp, rmsnorm.cpp, softmax.cpp, attention.cpp's row steps,
//      cross_entropy.cpp)
/// LayerNorm of n rows of h: y, and mean/rstd [n] (statistics in double, rounded once).
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                       const float* beta, int64_t n, int64_t h, float eps);
/// dx [n, h], dgamma [h], dbeta [h] (column sums in double).
void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, const float* mean, const float* rstd, int64_t n, int64_t h);
/// RMSNorm of n rows of h: rstd [n] = 1/√(Σ x²/h + eps) (the squares summed in double, rounded once)
/// and y [n, h] = x·rstd·w (w [h]), with the CPU's float operations in its order.
void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int64_t n, int64_t h, float eps);
/// dx [n, h] = rstd·(dx̂ − x̂·mean(dx̂·x̂)) per row (x̂ = x·rstd, dx̂ = dy·w, the mean in double), and
/// dweight [h] += Σ_rows dy·x̂ (double, row order, rounded once, then added: the buffer accumulates).
void rmsnorm_backward(float* dx, float* dweight, const float* dy, const float* x, const float* w,
                      const float* rstd, int64_t n, int64_t h);
/// Row softmax of `rows` rows of n (all −inf rows give zeros).
void softmax_forward(float* y, const float* x, int64_t rows, int64_t n);
/// dx = y ⊙ (dy − Σ dy·y) per row.
void softmax_backward(float* dx, const float* dy, const float* y, int64_t rows, int64_t n);
/// In place on scores P [b·heads·s rows of s]: mask (key j > query i, j < first[i], key_ok[bi, j] == 0
/// when key_ok is given) then row softmax; rows with no visible key become zeros.
void attention_softmax(float* P, int64_t b, int64_t heads, int64_t s, const float* key_ok,
                       const int64_t* first);
/// In place dP ← P ⊙ (dP − Σ_j dP·P) per row (dP already multiplied by the dropout mask).
void attention_softmax_backward(float* dP, const float* P, int64_t rows, int64_t s);
/// Per row of logits [n, V]: loss (double), the float loss in losses (0 for ignored rows), the first
/// NaN/+inf column in bad_col (−1 if none). Rows with target −100 are skipped.
void cross_entropy_forward(double* loss, float* losses, int64_t* bad_col, const float* logits,
                           const int64_t* targets, int64_t n, int64_t V, double alpha);
/// dlogits (zeroed) rows = scale·(softmax − ((1−α)·onehot + α/V)); lse and bad_col per row as above.
void cross_entropy_backward(float* dlogits, double* lse, int64_t* bad_col, const float* logits,
                            const int64_t* targets, int64_t n, int64_t V, double alpha, double scale);

}  // namespace tpsp::cuda::kernels
