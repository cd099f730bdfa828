#include "engine/parallel_state.h"

#include "engine/error.h"

namespace tpsp {

void ParallelState::check_layout(int world_size, int tp) {
  TPSP_CHECK(tp >= 1, "tp=", tp, " must be at least 1");
  TPSP_CHECK(world_size >= 1, "world_size=", world_size, " must be at least 1");
  TPSP_CHECK(world_size % tp == 0, "world_size=", world_size, " is not divisible by tp=", tp);
}

std::vector<int> ParallelState::tp_group_ranks(int rank, int world_size, int tp) {
  check_layout(world_size, tp);
  TPSP_CHECK(rank >= 0 && rank < world_size, "rank=", rank, " is not in [0, world_size=", world_size, ")");
  std::vector<int> ranks;
  const int first = rank / tp * tp;
  for (int i = 0; i < tp; ++i) ranks.push_back(first + i);
  return ranks;
}

std::vector<int> ParallelState::dp_group_ranks(int rank, int world_size, int tp) {
  check_layout(world_size, tp);
  TPSP_CHECK(rank >= 0 && rank < world_size, "rank=", rank, " is not in [0, world_size=", world_size, ")");
  std::vector<int> ranks;
  for (int r = rank % tp; r < world_size; r += tp) ranks.push_back(r);
  return ranks;
}

ParallelState::ParallelState(std::shared_ptr<comm::ProcessGroup> world, int tp)
    : world_(std::move(world)), world_size_(world_->size()), world_rank_(world_->rank()), tp_size_(tp) {
  TPSP_CHECK(
      world_->name() == "world" || world_->global_ranks().size() == static_cast<std::size_t>(world_size_),
      "ParallelState needs the world group");
  check_layout(world_size_, tp);
  // Megatron's order: every rank creates every group (new_group is collective over the world).
  for (int first = 0; first < world_size_; first += tp) {
    auto g = world_->new_group(tp_group_ranks(first, world_size_, tp), "tp");
    if (g) tp_ = std::move(g);
  }
  for (int j = 0; j < tp; ++j) {
    auto g = world_->new_group(dp_group_ranks(j, world_size_, tp), "dp");
    if (g) dp_ = std::move(g);
  }
}

}  // namespace tpsp
