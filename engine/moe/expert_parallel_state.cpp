#include "engine/moe/expert_parallel_state.h"

#include <algorithm>

#include "engine/error.h"

namespace tpsp::moe {

namespace {

void check_rank(int rank, int world_size) {
  TPSP_CHECK(rank >= 0 && rank < world_size, "rank=", rank, " is not in [0, world_size=", world_size, ")");
}

}  // namespace

void ExpertParallelState::check_layout(int world_size, int ep, int etp) {
  TPSP_CHECK(ep >= 1, "expert_model_parallel_size=", ep, " must be at least 1");
  TPSP_CHECK(etp >= 1, "expert_tensor_parallel_size=", etp, " must be at least 1");
  TPSP_CHECK(world_size % (ep * etp) == 0, "world_size=", world_size,
             " is not divisible by expert_model_parallel_size (", ep, ") × expert_tensor_parallel_size (",
             etp, ") = ", ep * etp);
}

std::pair<int64_t, int64_t> ExpertParallelState::local_experts(int64_t num_experts, int ep, int ep_rank) {
  TPSP_CHECK(ep >= 1 && num_experts % ep == 0, "num_moe_experts=", num_experts,
             " is not divisible by expert_model_parallel_size=", ep);
  TPSP_CHECK(ep_rank >= 0 && ep_rank < ep, "ep_rank=", ep_rank, " is not in [0, ", ep, ")");
  const int64_t n = num_experts / ep;
  return {ep_rank * n, n};
}

std::vector<int> ExpertParallelState::etp_group_ranks(int rank, int world_size, int ep, int etp) {
  check_layout(world_size, ep, etp);
  check_rank(rank, world_size);
  std::vector<int> v;
  for (int i = 0; i < etp; ++i) v.push_back(rank / etp * etp + i);
  return v;
}

std::vector<int> ExpertParallelState::ep_group_ranks(int rank, int world_size, int ep, int etp) {
  check_layout(world_size, ep, etp);
  check_rank(rank, world_size);
  const int block = rank / (ep * etp) * (ep * etp);
  std::vector<int> v;
  for (int i = 0; i < ep; ++i) v.push_back(block + i * etp + rank % etp);
  return v;
}

std::vector<int> ExpertParallelState::tp_ep_group_ranks(int rank, int world_size, int ep, int etp) {
  check_layout(world_size, ep, etp);
  check_rank(rank, world_size);
  std::vector<int> v;
  for (int i = 0; i < ep * etp; ++i) v.push_back(rank / (ep * etp) * (ep * etp) + i);
  return v;
}

std::vector<int> ExpertParallelState::edp_group_ranks(int rank, int world_size, int ep, int etp) {
  check_layout(world_size, ep, etp);
  check_rank(rank, world_size);
  std::vector<int> v;
  for (int r = rank % (ep * etp); r < world_size; r += ep * etp) v.push_back(r);
  return v;
}

ExpertParallelState::ExpertParallelState(std::shared_ptr<comm::ProcessGroup> world, int ep, int etp)
    : world_size_(world->size()), world_rank_(world->rank()), ep_size_(ep), etp_size_(etp) {
  check_layout(world_size_, ep, etp);
  // Every rank creates every group, in one order (new_group is collective over the world).
  using Ranks = std::vector<int> (*)(int, int, int, int);
  const std::pair<Ranks, std::shared_ptr<comm::ProcessGroup>*> kinds[] = {{&etp_group_ranks, &etp_},
                                                                          {&ep_group_ranks, &ep_},
                                                                          {&tp_ep_group_ranks, &tp_ep_},
                                                                          {&edp_group_ranks, &edp_}};
  const char* names[] = {"etp", "ep", "tp_ep", "edp"};
  for (int k = 0; k < 4; ++k) {
    std::vector<std::vector<int>> made;
    for (int r = 0; r < world_size_; ++r) {
      std::vector<int> ranks = kinds[k].first(r, world_size_, ep, etp);
      if (std::find(made.begin(), made.end(), ranks) != made.end()) continue;
      made.push_back(ranks);
      auto g = world->new_group(ranks, names[k]);
      if (g) *kinds[k].second = std::move(g);
    }
  }
}

}  // namespace tpsp::moe
