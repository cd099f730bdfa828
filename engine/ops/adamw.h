// AdamW (Loshchilov & Hutter 2019) with PyTorch's torch.optim.AdamW update order.
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace tpsp::ops {

/// Hyper-parameters (PyTorch's defaults except weight_decay, which PyTorch also defaults to 0.01).
struct AdamWConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
};

/// First and second moments, shaped like the parameter (zero at step 0).
struct AdamWState {
  Tensor m;
  Tensor v;
};

/// One update at 1-based step t:  p ← p·(1 − lr·wd); m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²;
/// p ← p − (lr / (1−β1ᵗ)) · m / (√v / √(1−β2ᵗ) + eps). Creates the state on first use.
/// Throws ShapeError when param, grad and state shapes differ, or t < 1.
void adamw_step(Tensor& param, const Tensor& grad, AdamWState& state, int64_t t, const AdamWConfig& cfg);

}  // namespace tpsp::ops
