// Causal multi-head attention on the GPU (engine/ops/attention.h's semantics and options, the
// algorithm of engine/ops/cpu/attention.cpp): the per-(batch, head) products are strided batched
// cuBLAS GEMMs over the b·heads blocks of qkv, with the mask, softmax and dropout as row kernels.
#pragma once

#include "engine/ops/attention.h"
#include "engine/tensor.h"

namespace tpsp::cuda {

/// qkv [s, b, groups·(heads/groups + 2)·d] f32 on cuda (heads·3·d without GQA) → out [s, b, heads·d] and
/// probs [b, heads, s, s] on cuda. Errors as ops::attention_forward (ShapeError on bad shapes, padding mask
/// or cu_seqlens).
ops::AttentionOut attention_forward(const Tensor& qkv, const ops::AttentionOptions& opt);
/// dqkv shaped like qkv on cuda (a group's dk, dv summed over its heads); the dropout mask is regenerated
/// from the key.
Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                          const ops::AttentionOptions& opt);

}  // namespace tpsp::cuda
