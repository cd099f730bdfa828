// tpsp-train: one rank of the DP × TP (+ SP) GPT, trained on byte-level text. Start it through the
// launcher: `tpsp-run -n TP*DP -- tpsp-train --tp 2 --sp --out DIR`. World rank 0 writes:
//   DIR/report.json   per-step losses (averaged over DP), wall time, the communication of one
//                     training step (from the recorder), activation bytes per layer with and
//                     without SP
//   DIR/params/*.npy  every parameter after training, gathered whole (vocabulary padding dropped; an
//                     MoE model's experts over the ep and etp groups)
//   DIR/trace.json    Chrome trace of that step: communication per group and compute spans (GEMMs,
//                     attention, layer phases) on one clock (open in Perfetto)
// A rank that reaches an unimplemented lab TODO (a learner copy) writes its message to
// DIR/not_implemented.txt and exits 3.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/comm/env.h"
#include "engine/error.h"
#include "engine/io/npy.h"
#include "engine/lab_todo.h"
#include "engine/model/gpt.h"
#include "engine/moe/expert_parallel_state.h"
#include "engine/parallel_state.h"
#include "engine/runtime/device_runtime.h"
#include "engine/trace/span.h"
#include "engine/train/data.h"
#include "tools/train/options.h"

namespace {

using namespace tpsp;
using nlohmann::json;

/// Per-op count and bytes of the recorded calls (this rank), for the report.
json comm_summary(const std::vector<trace::CommRecord>& records) {
  std::map<std::string, std::pair<int64_t, uint64_t>> by_op;
  for (const trace::CommRecord& r : records) {
    auto& e = by_op[std::string(comm::op_name(r.op)) + " (" + r.group + ")"];
    e.first += 1;
    e.second += r.bytes;
  }
  json out = json::array();
  for (const auto& [name, e] : by_op) out.push_back({{"op", name}, {"calls", e.first}, {"bytes", e.second}});
  return out;
}

/// One expert weight, whole, on every rank (collective over the ep and etp groups: every rank calls it for
/// every expert placement, in the same order). Each EP rank holds the same number of experts, so the ep
/// all-gather stacks, for this rank's local index of `where.expert`, every EP rank's shard; the holder's is
/// then gathered over its ETP group along the placement's dim.
Tensor gather_expert(model::ParallelGPT& gpt, const model::ExpertPlacement& where,
                     moe::ExpertParallelState& eps) {
  const int64_t per_rank = gpt.config().num_moe_experts / eps.ep_size();
  const int holder = static_cast<int>(where.expert / per_rank);
  const int64_t mine = eps.ep_rank() * per_rank + where.expert % per_rank;  // the same local index here
  const std::string name =
      model::moe_expert_prefix("decoder.layers." + std::to_string(where.layer) + ".", mine) + where.part +
      ".weight";
  const Tensor& shard = gpt.params().at(name);
  const int64_t rows = shard.size(0);
  const Tensor held =
      eps.ep().all_gather(shard, 0, {"gather_params.ep"}).slice0(holder * rows, (holder + 1) * rows);
  if (eps.etp_size() == 1) return held.clone();
  return whole_of_gathered(eps.etp().all_gather(held.clone(), where.placement.dim, {"gather_params.etp"}),
                           where.placement, eps.etp_size());
}

int run(const train::TrainOptions& o, const std::string& out_dir) {
  std::filesystem::create_directories(out_dir);
  const runtime::DeviceChoice choice = runtime::parse_device(o.device);
  const Device device = runtime::activate(choice);
  auto world = runtime::init_world(choice, o.backend);
  world->set_fingerprints(o.check_collectives);  // before the TP/DP groups, which inherit it
  trace::install(world->recorder_ptr());         // trace.json shows compute beside communication
  TPSP_CHECK(world->size() == o.tp * o.dp, "dp=", o.dp, " x tp=", o.tp, " = ", o.dp * o.tp,
             " ranks are needed but the launcher started world_size=", world->size());
  TPSP_CHECK(o.batch % o.dp == 0, "global batch b=", o.batch, " is not divisible by dp=", o.dp);
  if (!o.link.empty()) world->set_link(comm::LinkModel::parse(o.link));
  ParallelState ps(world, o.tp);
  const bool moe = o.gpt.num_moe_experts > 0;
  std::unique_ptr<moe::ExpertParallelState> eps;  // the expert groups, folded over the same world
  if (moe) eps = std::make_unique<moe::ExpertParallelState>(world, o.ep, o.etp);
  const train::ByteDataset data(o.text);
  model::ParallelGPT gpt(o.gpt, o.seed, ps,
                         {.sequence_parallel = o.sequence_parallel,
                          .tp_comm_overlap = o.tp_comm_overlap,
                          .device = device,
                          .experts = eps.get()});
  const int64_t b_local = o.batch / o.dp;

  std::vector<float> losses, aux_losses;
  std::vector<trace::CommRecord> step_records;
  const auto t0 = std::chrono::steady_clock::now();
  TokenBatch ids, targets;
  for (int64_t step = 0; step < o.steps; ++step) {
    data.batch(step, o.batch, o.gpt.seq, o.seed, ids, targets);
    const TokenBatch my_ids = train::ByteDataset::rows(ids, ps.dp_rank() * b_local, b_local);
    const TokenBatch my_targets = train::ByteDataset::rows(targets, ps.dp_rank() * b_local, b_local);
    const bool record = step == std::min<int64_t>(1, o.steps - 1);
    if (record) world->recorder().clear();
    const float loss = gpt.forward(my_ids, my_targets, step);
    gpt.backward();
    gpt.step(o.adamw);
    if (record) step_records = world->recorder().records();
    Tensor l = Tensor::from({1}, {loss / static_cast<float>(o.dp)});
    if (o.dp > 1) ps.dp().all_reduce(l, comm::ReduceOp::sum, {"report.loss"});
    losses.push_back(l.at(0));
    if (!moe) continue;
    // The load-balancing loss: this rank's share, summed over its sequence group (TP under SP), then
    // averaged over DP as the loss is.
    Tensor a = Tensor::from({1}, {gpt.aux_loss() / static_cast<float>(o.dp)});
    if (o.sequence_parallel && o.tp > 1) ps.tp().all_reduce(a, comm::ReduceOp::sum, {"report.aux_loss"});
    if (o.dp > 1) ps.dp().all_reduce(a, comm::ReduceOp::sum, {"report.aux_loss"});
    aux_losses.push_back(a.at(0));
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (world->rank() == 0) world->recorder().write_chrome_trace(out_dir + "/trace.json");

  // Activation memory per rank: this run's setting, and one forward with SP switched.
  const std::vector<std::size_t> mem_this = gpt.activation_bytes_per_layer();
  // (An MoE model at tp > 1 needs SP: no other setting to show.)
  std::vector<std::size_t> mem_other;
  if ((o.sequence_parallel || o.gpt.seq % o.tp == 0) && !(moe && o.tp > 1)) {
    model::ParallelGPT other(
        o.gpt, o.seed, ps,
        {.sequence_parallel = !o.sequence_parallel, .device = device, .experts = eps.get()});
    other.forward(train::ByteDataset::rows(ids, ps.dp_rank() * b_local, b_local),
                  train::ByteDataset::rows(targets, ps.dp_rank() * b_local, b_local), 0);
    mem_other = other.activation_bytes_per_layer();
  }

  if (ps.dp_rank() == 0) {
    std::filesystem::create_directories(out_dir + "/params");
    for (const auto& [name, shard] : gpt.params()) {
      if (gpt.expert_placements().contains(name)) continue;  // placed over the expert groups: below
      const model::ShardSpec& spec = gpt.shard_spec(name);
      Tensor whole = spec.placement.is_shard()
                         ? whole_of_gathered(ps.tp().all_gather(shard, spec.placement.dim, {"gather_params"}),
                                             spec.placement, o.tp)
                         : shard;
      if (whole.size(0) > o.gpt.vocab && spec.global_shape[0] == gpt.padded_vocab() &&
          spec.placement == Placement::Shard(0))
        whole = whole.slice0(0, o.gpt.vocab);
      if (world->rank() == 0)
        io::save_npy(out_dir + "/params/" + name + ".npy", whole.to(Device::cpu).to(DType::f32));
    }
  }
  if (moe) {  // every rank takes part in the gathers over the expert groups
    std::filesystem::create_directories(out_dir + "/params");
    for (const auto& [name, where] : gpt.expert_placements()) {
      const Tensor whole = gather_expert(gpt, where, *eps);
      if (world->rank() == 0) io::save_npy(out_dir + "/params/" + name + ".npy", whole);
    }
  }
  if (world->rank() == 0) {
    json report = {{"losses", losses},
                   {"aux_losses", aux_losses},
                   {"ep", moe ? o.ep : 0},
                   {"etp", moe ? o.etp : 0},
                   {"device", o.device},
                   {"backend", world->backend().name()},
                   {"wall_s", wall},
                   {"tp", o.tp},
                   {"dp", o.dp},
                   {"sequence_parallel", o.sequence_parallel},
                   {"tp_comm_overlap", o.tp_comm_overlap},
                   {"comm_step", comm_summary(step_records)},
                   {"comm_step_calls", step_records.size()},
                   {"activation_bytes_per_layer", mem_this},
                   {"activation_bytes_per_layer_other_sp", mem_other}};
    std::ofstream(out_dir + "/report.json") << report.dump(1) << "\n";
  }
  world->barrier({"done"});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpsp-train: one rank of the TP+SP GPT. Start it with: tpsp-run -n TP*DP -- tpsp-train ..."};
  tpsp::train::TrainOptions o;
  std::string out_dir;
  tpsp::train::add_train_options(app, o);
  app.add_option("--out", out_dir, "directory for the report, parameters and trace")->required();
  CLI11_PARSE(app, argc, argv);
  train::apply_model(o);
  try {
    return run(o, out_dir);
  } catch (const tpsp::NotImplemented& e) {
    // A learner copy runs the learner's lab code: say which TODO stopped the run (tpsp-demo shows it).
    std::ofstream(out_dir + "/not_implemented.txt") << e.what() << "\n";
    std::fprintf(stderr, "tpsp-train: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tpsp-train: error: %s\n", e.what());
    return 1;
  }
}
