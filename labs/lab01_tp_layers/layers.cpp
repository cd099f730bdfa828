// ColumnParallelLinear and RowParallelLinear (see layers.h).
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
  // TODO(lab01 ColumnParallelLinear forward): x [s, b, in] (under SP: this rank's rows [s/tp, b, in]);
  // weight_ A_r [out/tp, in] and bias_ b_r [out/tp] (may be undefined) are rank r's rows of A and b. Return
  // chunk r of the last dim of the single-process X·Aᵀ + b, [s, b, out/tp] (no bias with skip_bias_add;
  // with gather_output the whole [s, b, out] on every rank). Keep in `saved` what backward needs, the input
  // as received; never write into x. Communication on tp: without SP none (gather_output: one all-gather
  // along dim 2 of [s, b, out]); under SP one all-gather along dim 0 of [s, b, in].
  TPSP_LAB_TODO("lab01 ColumnParallelLinear forward: x [s, b, in] (under SP: this rank's rows [s/tp, b, in]); weight_ A_r [out/tp, in] and bias_ b_r [out/tp] (may be undefined) are rank r's rows of A and b. Return chunk r of the last dim of the single-process X·Aᵀ + b, [s, b, out/tp] (no bias with skip_bias_add; with gather_output the whole [s, b, out] on every rank). Keep in `saved` what backward needs, the input as received; never write into x. Communication on tp: without SP none (gather_output: one all-gather along dim 2 of [s, b, out]); under SP one all-gather along dim 0 of [s, b, in]");
}

Tensor ColumnParallelLinear::backward(const Tensor& dy_in, const LinearSaved& saved, ProcessGroup& tp) {
  if (opt_.tp_comm_overlap) return backward_overlap(dy_in, saved, tp);  // lab04
  // TODO(lab01 ColumnParallelLinear backward): dy [s, b, out/tp] (gather_output: [s, b, out]) and `saved`
  // -> dX [s, b, in] = the single-process dX on every rank (under SP: this rank's rows [s/tp, b, in]). Add
  // (+=) this rank's rows of dA [out/tp, in] to dweight_ and of db [out/tp] to dbias_ (db also with
  // skip_bias_add; skip an undefined buffer, dX is still needed). Communication on tp per call: without SP
  // one all-reduce (sum) of [s, b, in]; under SP one all-gather along dim 0 of [s, b, in] and one
  // reduce-scatter (sum) along dim 0 of an [s, b, in] input.
  TPSP_LAB_TODO("lab01 ColumnParallelLinear backward: dy [s, b, out/tp] (gather_output: [s, b, out]) and `saved` -> dX [s, b, in] = the single-process dX on every rank (under SP: this rank's rows [s/tp, b, in]). Add (+=) this rank's rows of dA [out/tp, in] to dweight_ and of db [out/tp] to dbias_ (db also with skip_bias_add; skip an undefined buffer, dX is still needed). Communication on tp per call: without SP one all-reduce (sum) of [s, b, in]; under SP one all-gather along dim 0 of [s, b, in] and one reduce-scatter (sum) along dim 0 of an [s, b, in] input");
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
  // TODO(lab01 RowParallelLinear forward): x [s, b, in/tp], chunk r of the last dim (input_is_parallel;
  // otherwise the whole [s, b, in] on every rank); weight_ B_r [out, in/tp] is rank r's columns of B, bias_
  // b [out] is whole. Return the single-process X·Bᵀ + b, [s, b, out] on every rank (under SP: this rank's
  // rows [s/tp, b, out]; no bias with skip_bias_add). Keep in `saved` what backward needs. Communication on
  // tp: without SP one all-reduce (sum) of [s, b, out]; under SP one reduce-scatter (sum) along dim 0 of an
  // [s, b, out] input.
  TPSP_LAB_TODO("lab01 RowParallelLinear forward: x [s, b, in/tp], chunk r of the last dim (input_is_parallel; otherwise the whole [s, b, in] on every rank); weight_ B_r [out, in/tp] is rank r's columns of B, bias_ b [out] is whole. Return the single-process X·Bᵀ + b, [s, b, out] on every rank (under SP: this rank's rows [s/tp, b, out]; no bias with skip_bias_add). Keep in `saved` what backward needs. Communication on tp: without SP one all-reduce (sum) of [s, b, out]; under SP one reduce-scatter (sum) along dim 0 of an [s, b, out] input");
}

Tensor RowParallelLinear::backward(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp) {
  if (opt_.tp_comm_overlap) return backward_overlap(dy, saved, tp);  // lab04
  // TODO(lab01 RowParallelLinear backward): dy [s, b, out] (under SP: this rank's rows [s/tp, b, out]) ->
  // dX [s, b, in/tp], chunk r of the last dim of the single-process dX (without input_is_parallel: the
  // whole [s, b, in] on every rank). Add (+=) dB's columns [out, in/tp] to dweight_ and db [out] to dbias_
  // (also with skip_bias_add; under SP db from this rank's tokens only). Communication on tp per call:
  // without SP none (without input_is_parallel: one all-gather along dim 2 of [s, b, in]); under SP one
  // all-gather along dim 0 of [s, b, out].
  TPSP_LAB_TODO("lab01 RowParallelLinear backward: dy [s, b, out] (under SP: this rank's rows [s/tp, b, out]) -> dX [s, b, in/tp], chunk r of the last dim of the single-process dX (without input_is_parallel: the whole [s, b, in] on every rank). Add (+=) dB's columns [out, in/tp] to dweight_ and db [out] to dbias_ (also with skip_bias_add; under SP db from this rank's tokens only). Communication on tp per call: without SP none (without input_is_parallel: one all-gather along dim 2 of [s, b, in]); under SP one all-gather along dim 0 of [s, b, out]");
}

}  // namespace tpsp::tensor_parallel
