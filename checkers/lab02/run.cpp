// lab02 on the ranks: the learner's VocabParallelEmbedding, vocab-parallel cross entropy and RNG
// tracker (the transformer layer runs from checkers/layer/run.cpp). The cross entropy is host code by
// design (the lesson is which three all-reduces of n floats replace gathering the logits; the solution
// loops over them with data()), so its scenarios run on the host even under ./check --device
// (RunContext::run_on_host). The tracker hands out host floats (a std::vector): its scenarios put the
// tensors they build from them on the device.
#include "checkers/layer/run.h"

#include "checkers/lab02/lab02.h"
#include "checkers/run_context.h"
#include "engine/error.h"
#include "engine/tensor_parallel/cross_entropy.h"
#include "engine/tensor_parallel/layers.h"
#include "engine/tensor_parallel/random.h"

namespace tpsp::checkers {

RankOutputs run_vocab_embedding(RunContext& ctx) {
  using namespace lab02;
  const int n = ctx.size();
  const int64_t vp = padded_to(V, n);
  Tensor dwte({vp / n, H}, DType::f32, ctx.device);
  tensor_parallel::VocabParallelEmbedding emb(ctx.on_device(wte(ctx.in, vp)), dwte, ctx.sp,
                                              "check.embedding");
  const TokenBatch ids = emb_ids(ctx.in);
  const Tensor dout = ctx.on_device(emb_dout(ctx.in, ctx.sp));
  ctx.begin_phase("forward");
  const Tensor out = emb.forward(ids, *ctx.tp);
  ctx.begin_phase("backward");
  for (int pass = 0; pass < kPasses; ++pass) {
    InputGuard g("VocabParallelEmbedding.backward", {{"dout", &dout}});
    emb.backward(dout, ids, *ctx.tp);
    g.check();
  }
  return {{"out", out.clone()}, {"dweight", dwte}};
}

namespace {

using namespace lab02;

RankOutputs run_cross_entropy(RunContext& ctx, const CECase& cc) {
  ctx.run_on_host();
  const int n = ctx.size(), r = ctx.rank();
  const int64_t vp = padded_to(V, n);
  const Tensor logits = ce_logits(ctx.in, vp, cc.scale, r * (vp / n));
  const std::vector<int64_t> targets = ce_case_targets(ctx.in, cc);
  tensor_parallel::VocabParallelCESaved saved;
  ctx.begin_phase("forward");
  const auto res = guarded("vocab_parallel_cross_entropy_forward", {{"logits", &logits}}, [&] {
    return tensor_parallel::vocab_parallel_cross_entropy_forward(logits, targets, V, cc.alpha, *ctx.tp, saved,
                                                                 "check.ce");
  });
  ctx.begin_phase("backward");
  const Tensor dlogits = tensor_parallel::vocab_parallel_cross_entropy_backward(saved, kDLoss, *ctx.tp);
  return {{"losses", res.losses.clone()}, {"loss", Tensor::from({1}, {res.loss})}, {"dlogits", dlogits}};
}

/// Inputs the cross entropy must refuse before any collective: a target equal to V, a target −1, and
/// (tp > 1) the already-gathered full-vocabulary logits instead of this rank's V/tp columns.
RankOutputs run_cross_entropy_bad_inputs(RunContext& ctx) {
  ctx.run_on_host();
  const int n = ctx.size(), r = ctx.rank();
  // The already-gathered logits are every rank's here by design: the scenario asks for their refusal.
  const int64_t vp = padded_to(V, n);
  const Tensor whole = input_tensor({S * B, vp}, ctx.in, "ce.full_vocabulary_logits");
  const Tensor local = ce_logits(ctx.in, vp, 1.f, r * (vp / n));
  auto call = [&](const Tensor& logits, std::vector<int64_t> targets) {
    tensor_parallel::VocabParallelCESaved saved;
    tensor_parallel::vocab_parallel_cross_entropy_forward(logits, targets, V, 0.f, *ctx.tp, saved,
                                                          "check.ce");
  };
  const std::vector<int64_t> targets = ce_targets(ctx.in);
  std::vector<int64_t> t_v = targets, t_neg = targets;
  t_v[5] = V;
  t_neg[7] = -1;
  ctx.begin_phase("refusals");
  RankOutputs out;
  check_accepts(ctx, out, "targets_in_range", [&] { call(local, targets); });
  check_refusal(ctx, out, "target_equal_to_V", [&] { call(local, t_v); });
  check_refusal(ctx, out, "target_minus_1", [&] { call(local, t_neg); });
  if (n > 1) check_refusal(ctx, out, "full_vocabulary_logits", [&] { call(whole, targets); });
  return out;
}

/// kDraw uniforms of the tracker's current generator as a [1, kDraw] row on the scenario's device.
Tensor draw(const RunContext& ctx, tensor_parallel::RngStatesTracker& t) {
  return ctx.on_device(Tensor::from({1, kDraw}, t.uniform(kDraw)));
}

/// Draws from the default stream, inside one fork of the model-parallel stream, and after it.
RankOutputs run_rng(RunContext& ctx) {
  tensor_parallel::RngStatesTracker tracker;
  tensor_parallel::model_parallel_manual_seed(tracker, tracker_seed(ctx.model_seed), ctx.rank());
  const Tensor before = draw(ctx, tracker);
  Tensor inside;
  {
    auto guard = tracker.fork();
    inside = draw(ctx, tracker);
  }
  return {{"default_before_fork", before},
          {"model_parallel_in_fork", inside},
          {"default_after_fork", draw(ctx, tracker)}};
}

/// Nested forks: model-parallel, inside it data-parallel, back in model-parallel, then the default
/// stream, then data-parallel again (its state must have been saved when its fork ended).
RankOutputs run_rng_nested(RunContext& ctx) {
  using tensor_parallel::kDataParallelRngName;
  tensor_parallel::RngStatesTracker tracker;
  tensor_parallel::model_parallel_manual_seed(tracker, tracker_seed(ctx.model_seed), ctx.rank());
  RankOutputs out;
  {
    auto mp = tracker.fork();
    out["mp_first"] = draw(ctx, tracker);
    {
      auto dp = tracker.fork(kDataParallelRngName);
      out["dp_inside_mp"] = draw(ctx, tracker);
    }
    out["mp_after_inner_fork"] = draw(ctx, tracker);
  }
  out["default_after_forks"] = draw(ctx, tracker);
  {
    auto dp = tracker.fork(kDataParallelRngName);
    out["dp_again"] = draw(ctx, tracker);
  }
  return out;
}

/// 1 if fn raised ShapeError (std::invalid_argument) whose message contains `value` ("naming it"), else 0.
template <class F>
Tensor refused_naming(F&& fn, const std::string& value) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return Tensor::from({1}, {std::string(e.what()).find(value) != std::string::npos ? 1.f : 0.f});
  }
  return Tensor::from({1}, {0.f});
}

/// add() must refuse a name that exists and a seed that was already added, naming it.
RankOutputs run_rng_refusals(RunContext& ctx) {
  tensor_parallel::RngStatesTracker tracker;
  const uint64_t seed = tracker_seed(ctx.model_seed);
  tensor_parallel::model_parallel_manual_seed(tracker, seed, ctx.rank());
  const auto add_name = [&] { tracker.add(tensor_parallel::kModelParallelRngName, seed + 1000000); };
  const auto add_seed = [&] { tracker.add("another-rng", seed); };
  return {{"refuses_duplicate_name", ctx.on_device(refused(add_name))},
          {"names_duplicate_name",
           ctx.on_device(refused_naming(add_name, tensor_parallel::kModelParallelRngName))},
          {"refuses_duplicate_seed", ctx.on_device(refused(add_seed))},
          {"names_duplicate_seed", ctx.on_device(refused_naming(add_seed, std::to_string(seed)))},
          {"refuses_seed_inside_a_fork", ctx.on_device(refused([&] {
             auto guard = tracker.fork();
             tensor_parallel::model_parallel_manual_seed(tracker, tracker_seed(ctx.model_seed) + 1,
                                                         ctx.rank());
           }))}};
}

/// 1 if `fn` returned normally (no refusal), else 0; a [1] tensor on the host.
template <class F>
Tensor accepted(F&& fn) {
  return Tensor::from({1}, {1.f - refused(fn).at(0)});
}

/// The rest of the tracker's contract: fork refuses an unknown name, a refused add() leaves the
/// tracker unchanged, forking the state that is already current continues it, and seeding a used
/// tracker again resets it.
RankOutputs run_rng_contract(RunContext& ctx) {
  const uint64_t seed = tracker_seed(ctx.model_seed);
  tensor_parallel::RngStatesTracker tracker;
  tensor_parallel::model_parallel_manual_seed(tracker, seed, ctx.rank());
  RankOutputs out;
  out["refuses_fork_of_unknown_name"] = ctx.on_device(refused([&] { auto g = tracker.fork("never-added"); }));
  out["names_unknown_fork_name"] =
      ctx.on_device(refused_naming([&] { auto g = tracker.fork("never-added"); }, "never-added"));
  refused([&] { tracker.add(tensor_parallel::kModelParallelRngName, seed + 5); });  // a duplicate name
  out["accepts_seed_of_a_refused_add"] = ctx.on_device(accepted([&] { tracker.add("fresh", seed + 5); }));
  std::vector<Tensor> mp;
  {
    auto outer = tracker.fork();
    mp.push_back(draw(ctx, tracker));
    {
      auto inner = tracker.fork();  // the state that is already current: continues it
      mp.push_back(draw(ctx, tracker));
    }
    mp.push_back(draw(ctx, tracker));
  }
  out["mp_fork_of_current_continues"] = cat(mp, 1);
  tensor_parallel::model_parallel_manual_seed(tracker, seed + 1, ctx.rank());  // reseed a used tracker
  {
    auto g = tracker.fork();
    out["mp_after_reseed"] = draw(ctx, tracker);
  }
  out["default_after_reseed"] = draw(ctx, tracker);
  return out;
}

void add_runs(std::map<std::string, RunFn>& out) {
  out["lab02/vocab_embedding"] = run_vocab_embedding;
  out["lab02/cross_entropy"] = [](RunContext& c) { return run_cross_entropy(c, {}); };
  out["lab02/cross_entropy_label_smoothing"] = [](RunContext& c) {
    return run_cross_entropy(c, {.alpha = 0.1f});
  };
  out["lab02/cross_entropy_large_logits"] = [](RunContext& c) {
    return run_cross_entropy(c, {.scale = 1000.f});
  };
  out["lab02/cross_entropy_all_ignored"] = [](RunContext& c) {
    return run_cross_entropy(c, {.all_ignored = true});
  };
  out["lab02/cross_entropy_bad_inputs"] = run_cross_entropy_bad_inputs;
  out["lab02/transformer_layer"] = layer::run_layer;
  out["lab02/transformer_layer_checks_seq"] = layer::run_layer_wrong_seq;
  out["lab02/rng_tracker"] = run_rng;
  out["lab02/rng_tracker_nested_forks"] = run_rng_nested;
  out["lab02/rng_tracker_refusals"] = run_rng_refusals;
  out["lab02/rng_tracker_contract"] = run_rng_contract;
  out["lab02/gpt_step"] = run_gpt_step;
  out["lab02/packed_sequences"] = run_packed_sequences;
}

}  // namespace

const LabRuns kRuns(add_runs);

}  // namespace tpsp::checkers
