// The CPU's ops: a DeviceOps (engine/ops/device_ops.h) whose members are defined by the kernel files
// of this folder, one file per op family (matmul.cpp: OpenBLAS sgemm; layernorm.cpp, rmsnorm.cpp,
// softmax.cpp, attention.cpp, ...), on f32 CPU tensors whose arguments already passed their op's rule
// (engine/ops/rules.h). Semantics, shapes and errors: the public headers engine/ops/*.h. A CUDA
// build has the same members in engine/ops/cuda/ (llm.c keeps its .c and .cu functions alike).
#pragma once

#include "engine/ops/device_ops.h"

namespace tpsp::ops::cpu {

class CpuOps final : public DeviceOps {
 public:
  Tensor matmul_forward(const Tensor& x, const Tensor& w) override;
  Tensor matmul_dgrad(const Tensor& dy, const Tensor& w) override;
  void matmul_wgrad(const Tensor& dy, const Tensor& x, Tensor& dw) override;
  MatmulGrads matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx,
                              bool need_dw) override;
  void bias_add_forward(Tensor& y, const Tensor& b) override;
  Tensor bias_add_backward(const Tensor& dy) override;

  Tensor add(const Tensor& a, const Tensor& b) override;
  void add_(Tensor& a, const Tensor& b) override;
  void scale_(Tensor& a, float s) override;
  Tensor gelu_forward(const Tensor& x) override;
  Tensor gelu_backward(const Tensor& dy, const Tensor& x) override;

  LayerNormOut layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 float eps) override;
  LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                    const Tensor& mean, const Tensor& rstd) override;
  RMSNormOut rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps) override;
  Tensor rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                          Tensor& dweight) override;

  Tensor swiglu_forward(const Tensor& x) override;
  Tensor swiglu_backward(const Tensor& dy, const Tensor& x) override;
  Tensor rope_rotate(const Tensor& x, const std::vector<float>& cos, const std::vector<float>& sin,
                     int64_t d) override;

  Tensor softmax_forward(const Tensor& x) override;
  Tensor softmax_backward(const Tensor& dy, const Tensor& y) override;

  AttentionOut attention_forward(const Tensor& qkv, const AttentionOptions& opt) override;
  Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                            const AttentionOptions& opt) override;

  Tensor embedding_forward(const TokenBatch& ids, const Tensor& wte, int64_t vocab_start) override;
  Tensor embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local,
                            int64_t vocab_start) override;
  void position_embedding_add(Tensor& x, const Tensor& wpe, int64_t seq_start) override;
  Tensor position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start) override;

  CrossEntropyOut cross_entropy_forward(const Tensor& logits, const std::vector<int64_t>& targets,
                                        float label_smoothing) override;
  Tensor cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& targets, float dloss,
                                float label_smoothing) override;

  Tensor dropout_forward(const Tensor& x, float p, const DropoutKey& key) override;
  Tensor dropout_backward(const Tensor& dy, float p, const DropoutKey& key) override;

  void adamw_step(Tensor& param, const Tensor& grad, AdamWState& state, int64_t t,
                  const AdamWConfig& cfg) override;
};

}  // namespace tpsp::ops::cpu
