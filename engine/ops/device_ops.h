// The ops of one device behind one interface: engine/ops/dispatch.cpp checks an op's arguments
// (engine/ops/rules.h) and then runs the DeviceOps of its tensors' device, the same path for every
// device. The CPU's are built in (engine/ops/cpu/: CpuOps); a GPU build registers CUDA's
// (engine/ops/cuda/: tpsp::cuda::register_backend()), and the emulated device registers CPU ops
// behind host copies (engine/emulated_device.h), so the engine library never links a device's
// runtime. Without registered ops, an op on a device tensor raises ShapeError naming the op, the
// device and the rule.
//
// Every function has the name and the semantics of the public op in engine/ops/*.h (documented
// there, with shapes and errors) on tensors of this device, and receives arguments that already
// passed that op's rule: a kernel only computes. Inputs are f32, except the GEMMs (matmul_*), which
// also take bf16 x, w and dy (f32 accumulation; outputs f32, the dispatcher rounds once). Host-side
// arguments (token ids, targets, cu_seqlens, a key padding mask on the CPU) are uploaded by the
// implementation. Results live on the device; the per-row statistics (norm mean/rstd, attention
// probabilities) too.
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
#include "engine/ops/rmsnorm.h"
#include "engine/ops/rope.h"
#include "engine/ops/swiglu.h"
#include "engine/tensor.h"
#include "engine/tokens.h"

namespace tpsp::ops {

class DeviceOps {
 public:
  virtual ~DeviceOps();

  virtual Tensor matmul_forward(const Tensor& x, const Tensor& w) = 0;
  virtual Tensor matmul_dgrad(const Tensor& dy, const Tensor& w) = 0;
  virtual void matmul_wgrad(const Tensor& dy, const Tensor& x, Tensor& dw) = 0;
  virtual MatmulGrads matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx,
                                      bool need_dw) = 0;
  virtual void bias_add_forward(Tensor& y, const Tensor& b) = 0;
  virtual Tensor bias_add_backward(const Tensor& dy) = 0;

  virtual Tensor add(const Tensor& a, const Tensor& b) = 0;
  virtual void add_(Tensor& a, const Tensor& b) = 0;
  virtual void scale_(Tensor& a, float s) = 0;
  virtual Tensor gelu_forward(const Tensor& x) = 0;
  virtual Tensor gelu_backward(const Tensor& dy, const Tensor& x) = 0;

  virtual LayerNormOut layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                         float eps) = 0;
  virtual LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                            const Tensor& mean, const Tensor& rstd) = 0;
  virtual RMSNormOut rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps) = 0;
  virtual Tensor rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                                  Tensor& dweight) = 0;

  virtual Tensor swiglu_forward(const Tensor& x) = 0;
  virtual Tensor swiglu_backward(const Tensor& dy, const Tensor& x) = 0;
  /// Rotary embedding's rotation of x [s, b, n·d] by a rope_table (engine/ops/rules.h) of [s, d/2]
  /// (rope_forward and rope_backward differ only in the table's sign).
  virtual Tensor rope_rotate(const Tensor& x, const std::vector<float>& cos, const std::vector<float>& sin,
                             int64_t d) = 0;

  virtual Tensor softmax_forward(const Tensor& x) = 0;
  virtual Tensor softmax_backward(const Tensor& dy, const Tensor& y) = 0;

  virtual AttentionOut attention_forward(const Tensor& qkv, const AttentionOptions& opt) = 0;
  virtual Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                    const AttentionOptions& opt) = 0;

  virtual Tensor embedding_forward(const TokenBatch& ids, const Tensor& wte, int64_t vocab_start) = 0;
  virtual Tensor embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local,
                                    int64_t vocab_start) = 0;
  virtual void position_embedding_add(Tensor& x, const Tensor& wpe, int64_t seq_start) = 0;
  virtual Tensor position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start) = 0;

  virtual CrossEntropyOut cross_entropy_forward(const Tensor& logits, const std::vector<int64_t>& targets,
                                                float label_smoothing) = 0;
  virtual Tensor cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& targets,
                                        float dloss, float label_smoothing) = 0;

  virtual Tensor dropout_forward(const Tensor& x, float p, const DropoutKey& key) = 0;
  virtual Tensor dropout_backward(const Tensor& dy, float p, const DropoutKey& key) = 0;

  virtual void adamw_step(Tensor& param, const Tensor& grad, AdamWState& state, int64_t t,
                          const AdamWConfig& cfg) = 0;
};

/// Installs the ops of `device` (the object must outlive every later op call). ShapeError for
/// Device::cpu, whose ops are built in.
void register_device_ops(Device device, DeviceOps* ops);

/// The ops of `device`: the CPU's for Device::cpu, else the registered ones or nullptr.
DeviceOps* device_ops(Device device);

/// The CPU's ops (engine/ops/cpu/), on f32 CPU tensors; the emulated device runs them too.
DeviceOps& cpu_ops();

}  // namespace tpsp::ops
