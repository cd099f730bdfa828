// The CPU implementations of every op, with the names and semantics of the public headers in
// engine/ops/ (documented there), on float32 tensors only. engine/ops/dispatch.cpp routes to them;
// a CUDA build adds engine/ops/cuda/ with the same names (llm.c keeps its .c and .cu functions alike).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/ops/adamw.h"
#include "engine/ops/attention.h"
#include "engine/ops/cross_entropy.h"
#include "engine/ops/dropout.h"
#include "engine/ops/layernorm.h"
#include "engine/ops/matmul.h"
#include "engine/tensor.h"
#include "engine/tokens.h"

namespace tpsp::ops::cpu {

Tensor matmul_forward(const Tensor& x, const Tensor& w);
Tensor matmul_dgrad(const Tensor& dy, const Tensor& w);
void matmul_wgrad(const Tensor& dy, const Tensor& x, Tensor& dw);
MatmulGrads matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx, bool need_dw);
void bias_add_forward(Tensor& y, const Tensor& b);
Tensor bias_add_backward(const Tensor& dy);

Tensor add(const Tensor& a, const Tensor& b);
void add_(Tensor& a, const Tensor& b);
void scale_(Tensor& a, float s);
Tensor gelu_forward(const Tensor& x);
Tensor gelu_backward(const Tensor& dy, const Tensor& x);

LayerNormOut layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps);
LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                  const Tensor& rstd);

Tensor softmax_forward(const Tensor& x);
Tensor softmax_backward(const Tensor& dy, const Tensor& y);

AttentionOut attention_forward(const Tensor& qkv, const AttentionOptions& opt);
Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs, const AttentionOptions& opt);

Tensor embedding_forward(const TokenBatch& ids, const Tensor& wte, int64_t vocab_start);
Tensor embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local, int64_t vocab_start);
void position_embedding_add(Tensor& x, const Tensor& wpe, int64_t seq_start);
Tensor position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start);

CrossEntropyOut cross_entropy_forward(const Tensor& logits, const std::vector<int64_t>& targets, float label_smoothing);
Tensor cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& targets, float dloss,
                              float label_smoothing);

uint64_t dropout_stream(const std::string& site, int64_t iteration);
Tensor dropout_mask(const Shape& local_shape, float p, const DropoutKey& key);
Tensor dropout_forward(const Tensor& x, float p, const DropoutKey& key);
Tensor dropout_backward(const Tensor& dy, float p, const DropoutKey& key);

void adamw_step(Tensor& param, const Tensor& grad, AdamWState& state, int64_t t, const AdamWConfig& cfg);

}  // namespace tpsp::ops::cpu
