// The router's choice of each token's top-k experts (see router.h). lab06 replaces this file.
#include <algorithm>
#include <numeric>
#include <vector>

#include "engine/lab_todo.h"
#include "engine/moe/router.h"

namespace tpsp::moe {

void topk_experts(const float* logits, int64_t experts, int64_t topk, int64_t* chosen) {
  // TODO(lab06 topk_experts): chosen[0..topk) = the experts of the topk largest logits, largest first. Two
  // equal logits go in expert order, the lower expert first, so that every rank makes the same choice for
  // the same logits (std::sort and torch.topk leave the order of equal values open).
  TPSP_LAB_TODO("lab06 topk_experts");
}

}  // namespace tpsp::moe
