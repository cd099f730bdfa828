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
  // BEGIN SOLUTION
  std::vector<int64_t> order(static_cast<std::size_t>(experts));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::partial_sort(order.begin(), order.begin() + topk, order.end(), [logits](int64_t a, int64_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::copy(order.begin(), order.begin() + topk, chosen);
  // END SOLUTION
}

}  // namespace tpsp::moe
