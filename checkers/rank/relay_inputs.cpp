#include "checkers/rank/relay_inputs.h"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace tpsp::checkers {

namespace {

class RelaySource final : public InputSource {
 public:
  RelaySource(comm::RelayBackend& relay, int tp_rank, int tp, std::chrono::milliseconds timeout)
      : relay_(relay), tp_rank_(tp_rank), tp_(tp), timeout_(timeout) {}

  Tensor draw(const InputSpec& spec, Share share, int dim, int rank) const override {
    if (share == Share::of_rank && rank != tp_rank_)
      throw std::invalid_argument("input '" + spec.name + "': TP rank " + std::to_string(tp_rank_) +
                                  " asked for rank " + std::to_string(rank) + "'s own input");
    Shape mine = spec.shape;
    const bool split = share == Share::split && dim >= 0 && dim < static_cast<int>(mine.size());
    if (split) mine[static_cast<std::size_t>(dim)] /= tp_;  // a size tp does not divide: the relay says so
    const nlohmann::json ask = {{"name", spec.name},
                                {"shape", spec.shape},
                                {"scale", spec.scale},
                                {"exact", spec.exact},
                                {"share", share == Share::split     ? "split"
                                          : share == Share::of_rank ? "of_rank"
                                                                    : "whole"},
                                {"dim", dim}};
    Tensor t(mine);
    relay_.input(ask.dump(), t.data(), static_cast<std::size_t>(t.numel()) * sizeof(float), timeout_);
    return t;
  }

 private:
  comm::RelayBackend& relay_;
  int tp_rank_, tp_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::shared_ptr<const InputSource> relay_rank_source(comm::RelayBackend& relay, int tp_rank, int tp,
                                                     std::chrono::milliseconds timeout) {
  return std::make_shared<RelaySource>(relay, tp_rank, tp, timeout);
}

}  // namespace tpsp::checkers
