#include "engine/moe/expert_parallel_state.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/lab_todo.h"

namespace tpsp::moe {

namespace {

void check_rank(int rank, int world_size) {
  TPSP_CHECK(rank >= 0 && rank < world_size, "rank=", rank, " is not in [0, world_size=", world_size, ")");
}

}  // namespace

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
  // TODO(lab06 ep_group_ranks): the world is EDP blocks of EP·ETP consecutive ranks, ETP innermost (the
  // etp group of r is the ETP consecutive ranks holding r). The ep group of r: the EP ranks of r's block
  // with r's etp rank (r % ETP), in increasing order. W=4, EP=2, ETP=1: {0,1} {2,3}; EP=2, ETP=2: {0,2}
  // {1,3}; W=8, EP=2, ETP=2: rank 5's group is {5,7}.
  // BEGIN SOLUTION
  const int block = rank / (ep * etp) * (ep * etp);
  std::vector<int> v;
  for (int i = 0; i < ep; ++i) v.push_back(block + i * etp + rank % etp);
  return v;
  // END SOLUTION
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
  // TODO(lab06 edp_group_ranks): the expert-data-parallel group of r: the ranks at r's position in every
  // block of EP·ETP consecutive ranks (they hold the same expert shards), in increasing order. W=4, EP=2,
  // ETP=1: {0,2} {1,3}; W=8, EP=2, ETP=2: rank 5's group is {1,5}. It is not the attention's data-parallel
  // group (ranks at the same TP rank): the experts fold over TP × DP differently.
  // BEGIN SOLUTION
  std::vector<int> v;
  for (int r = rank % (ep * etp); r < world_size; r += ep * etp) v.push_back(r);
  return v;
  // END SOLUTION
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
