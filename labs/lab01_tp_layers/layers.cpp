// ColumnParallelLinear and RowParallelLinear (see layers.h): the constructors, the dispatch, and the
// tensor-parallel path (Shoeybi et al. 2019 §3, Fig. 3a). Under sequence parallelism forward and
// backward hand over to layers_sp.cpp (lab03), with tp_comm_overlap to layers_overlap.cpp (lab04).
// lab01 replaces this translation unit.
#include "engine/tensor_parallel/layers.h"

#include "engine/error.h"
#include "engine/lab_todo.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::tensor_parallel {

ColumnParallelLinear::ColumnParallelLinear(Tensor weight, Tensor bias, Tensor dweight, Tensor dbias,
                                           LinearOptions opt, std::string name)
    : weight_(std::move(weight)),
      bias_(std::move(bias)),
      dweight_(std::move(dweight)),
      dbias_(std::move(dbias)),
      opt_(opt),
      name_(std::move(name)) {}

Tensor ColumnParallelLinear::forward(const Tensor& x, LinearSaved& saved, ProcessGroup& tp) const {
  TPSP_CHECK(x.size(-1) == weight_.size(1), name_, ": input last dim ", x.size(-1), " != weight in_features ",
             weight_.size(1), " (input ", shape_str(x.shape()), ", weight ", shape_str(weight_.shape()), ")");
  if (opt_.tp_comm_overlap) return forward_overlap(x, saved, tp);  // lab04
  if (opt_.sequence_parallel) return forward_sp(x, saved, tp);     // lab03
  // TODO(lab01 ColumnParallelLinear forward): x [s, b, in], whole on every rank → Y_r = X·A_rᵀ + b_r,
  // [s, b, out/tp] (this rank's columns of Y; no bias when it is undefined or skip_bias_add), or the
  // whole [s, b, out] on every rank with gather_output. Communication on tp: none, or with
  // gather_output exactly one all-gather along the last dim (s·b·out·4 bytes). x is const and never
  // written; afterwards saved.input is x itself, and later calls never change the returned Y.
  TPSP_LAB_TODO("lab01 ColumnParallelLinear forward");
}

Tensor ColumnParallelLinear::backward(const Tensor& dy_in, const LinearSaved& saved, ProcessGroup& tp) {
  if (opt_.tp_comm_overlap) return backward_overlap(dy_in, saved, tp);  // lab04
  if (opt_.sequence_parallel) return backward_sp(dy_in, saved, tp);     // lab03
  // TODO(lab01 ColumnParallelLinear backward): dy shaped like forward's output ([s, b, out/tp], or
  // [s, b, out] with gather_output) → dX [s, b, in], the same whole sum dY·A on every rank. After the
  // call dweight_ += dY_rᵀ·X and dbias_ += Σ dY_r over s and b (both ADDED to what the buffers held;
  // dbias_ also under skip_bias_add; an undefined buffer is skipped, and a frozen weight still
  // returns dX). Communication on tp: exactly one all-reduce (sum) of s·b·in·4 bytes; none at tp = 1.
  TPSP_LAB_TODO("lab01 ColumnParallelLinear backward");
}

RowParallelLinear::RowParallelLinear(Tensor weight, Tensor bias, Tensor dweight, Tensor dbias,
                                     LinearOptions opt, std::string name)
    : weight_(std::move(weight)),
      bias_(std::move(bias)),
      dweight_(std::move(dweight)),
      dbias_(std::move(dbias)),
      opt_(opt),
      name_(std::move(name)) {
  TPSP_CHECK(!(opt_.sequence_parallel && !opt_.input_is_parallel), name_,
             ": sequence_parallel requires input_is_parallel (Megatron RowParallelLinear)");
}

Tensor RowParallelLinear::forward(const Tensor& x_in, LinearSaved& saved, ProcessGroup& tp) const {
  if (opt_.tp_comm_overlap) return forward_overlap(x_in, saved, tp);  // lab04
  if (opt_.sequence_parallel) return forward_sp(x_in, saved, tp);     // lab03
  // TODO(lab01 RowParallelLinear forward): x [s, b, in/tp] (this rank's chunk of the last dim;
  // input_is_parallel) or the whole [s, b, in] (then only its chunk r is used) → Y = X·Bᵀ + b, the
  // whole [s, b, out] on every rank, the full bias added exactly once (none when undefined or
  // skip_bias_add). Communication on tp: exactly one all-reduce (sum) of s·b·out·4 bytes; none at
  // tp = 1. A last dim that does not match the weight (in/tp, or with input_is_parallel = false a whole
  // x whose last dim is not tp·in/tp) is a ShapeError naming both shapes, before any communication;
  // afterwards saved.input is the [s, b, in/tp] chunk the product used.
  TPSP_LAB_TODO("lab01 RowParallelLinear forward");
}

Tensor RowParallelLinear::backward(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp) {
  if (opt_.tp_comm_overlap) return backward_overlap(dy, saved, tp);  // lab04
  if (opt_.sequence_parallel) return backward_sp(dy, saved, tp);     // lab03
  // TODO(lab01 RowParallelLinear backward): dy [s, b, out], the same on every rank → dX shaped like
  // forward's input: this rank's [s, b, in/tp] chunk of dY·B, or with input_is_parallel = false the
  // whole [s, b, in] on every rank. After the call dweight_ += dYᵀ·X_r and dbias_ += Σ dY over s and
  // b (ADDED; dbias_ also under skip_bias_add; undefined buffers skipped). Communication on tp: none,
  // or with input_is_parallel = false one all-gather along the last dim (s·b·in·4 bytes).
  TPSP_LAB_TODO("lab01 RowParallelLinear backward");
}

}  // namespace tpsp::tensor_parallel
