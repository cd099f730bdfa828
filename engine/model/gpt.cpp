// ParallelGPT (see gpt.h): sharded init, forward, backward, gradient synchronisation, AdamW.
#include "engine/model/gpt.h"

#include <array>
#include <cmath>

#include "engine/error.h"
#include "engine/model/finalize_grads.h"
#include "engine/model/finalize_moe_grads.h"
#include "engine/model/llama_tp.h"
#include "engine/ops/rmsnorm.h"
#include "engine/random/init.h"
#include "engine/trace/span.h"

namespace tpsp::model {

using tensor_parallel::ColumnParallelLinear;
using tensor_parallel::VocabParallelEmbedding;

/// Everything the last forward kept on this rank.
struct ParallelGPT::Saved {
  TokenBatch ids;
  std::vector<int64_t> targets;  // sequence-first flattening, matching logits rows
  int64_t seq_start = 0;
  ops::DropoutKey drop_emb;
  std::vector<LayerSaved> layers;
  std::vector<LlamaLayerSaved> llama_layers;
  std::vector<int64_t> positions;  // the Llama block's RoPE positions of the whole sequence
  Tensor x_final;
  ops::LayerNormOut lnf;
  ops::RMSNormOut rmsf;  // the Llama block's final RMSNorm
  tensor_parallel::LinearSaved out_in;
  Tensor logits;                             // [s, b, V_local]
  tensor_parallel::VocabParallelCESaved ce;  // on the host (the vocab-parallel CE is host code, lab02)
  bool device_ce = false;                    // tp = 1 on a device: the device's cross entropy op instead
  LayerContext ctx;
  int64_t real_seq = 0;  // s before padding (pad_sequence)
};

ParallelGPT::ParallelGPT(const GPTConfig& cfg, uint64_t seed, ParallelState& ps, ParallelOptions opt)
    : cfg_(cfg), seed_(seed), ps_(ps), opt_(opt) {
  cfg_.validate();
  const int tp = ps.tp_size();
  TPSP_CHECK(cfg_.heads % tp == 0, "heads=", cfg_.heads, " is not divisible by tp=", tp);
  TPSP_CHECK(cfg_.ffn_hidden() % tp == 0, "ffn=", cfg_.ffn_hidden(), " is not divisible by tp=", tp);
  padded_vocab_ = (cfg_.vocab + tp - 1) / tp * tp;
  for (int64_t i = 0; cfg_.llama() && i < cfg_.layers; ++i)  // before any parameter is drawn
    llama_layer_config(cfg_, i).validate(tp);
  if (cfg_.num_moe_experts > 0) validate_moe_layout();
  specs_ = gpt_shard_specs(cfg_, tp, opt_.sequence_parallel);
  expert_placements_ = gpt_expert_placements(cfg_);
  init_parameters();
  for (int64_t i = 0; i < cfg_.layers; ++i) {
    if (cfg_.llama())
      llama_layers_.emplace_back(llama_layer_config(cfg_, i), "decoder.layers." + std::to_string(i) + ".",
                                 params_, grads_, tp, opt_.sequence_parallel, opt_.tp_comm_overlap);
    else
      layers_.emplace_back(cfg_, i, params_, grads_, opt_.sequence_parallel, opt_.tp_comm_overlap);
  }
  embedding_ = std::make_unique<VocabParallelEmbedding>(params_.at("embedding.word_embeddings.weight"),
                                                        grads_.at("embedding.word_embeddings.weight"),
                                                        opt_.sequence_parallel, "embedding.word_embeddings");
  const std::string out_name = cfg_.tied ? "embedding.word_embeddings.weight" : "output_layer.weight";
  tensor_parallel::LinearOptions out_opt;
  out_opt.sequence_parallel = opt_.sequence_parallel;
  out_opt.tp_comm_overlap = opt_.tp_comm_overlap;
  output_layer_ = std::make_unique<ColumnParallelLinear>(params_.at(out_name), Tensor(), grads_.at(out_name),
                                                         Tensor(), out_opt, "output_layer");
}

void ParallelGPT::validate_moe_layout() const {
  const moe::ExpertParallelState* e = opt_.experts;
  TPSP_CHECK(e != nullptr, "num_moe_experts=", cfg_.num_moe_experts,
             ": a model with MoE layers needs ParallelOptions::experts (the expert groups, "
             "moe::ExpertParallelState)");
  TPSP_CHECK(e->world_size() == ps_.world_size(), "the expert groups fold over world_size=", e->world_size(),
             " but the model's DP x TP world has ", ps_.world_size(), " ranks");
  check_moe_layout(cfg_, ps_.world_size(), ps_.tp_size(), e->ep_size(), e->etp_size(), opt_);
}

void check_moe_layout(const GPTConfig& cfg, int world_size, int tp, int ep, int etp,
                      const ParallelOptions& opt) {
  moe::ExpertParallelState::check_layout(world_size, ep, etp);
  moe::ExpertParallelState::local_experts(cfg.num_moe_experts, ep, 0);  // E % EP
  TPSP_CHECK(cfg.moe_ffn() % etp == 0, "moe_ffn_hidden_size=", cfg.moe_ffn(),
             " is not divisible by expert_tensor_parallel_size=", etp);
  TPSP_CHECK(tp == 1 || opt.sequence_parallel, "MoE layers at tp=", tp,
             " need sequence parallelism (Megatron's rule: without it every TP rank would dispatch the same "
             "tokens)");
  TPSP_CHECK(opt.device == Device::cpu && opt.param_dtype == DType::f32,
             "MoE layers run on the CPU with float32 parameters only; this model asks for device ",
             device_name(opt.device), " (a GPU or the emulated device) and ", dtype_name(opt.param_dtype),
             " parameters");
}

void ParallelGPT::init_parameters() {
  const float scaled_std = cfg_.init_std / std::sqrt(2.f * static_cast<float>(cfg_.layers));
  auto draw = [&](const std::string& name, const Shape& shape) {
    Tensor whole(shape);
    const bool is_bias = name.ends_with(".bias");
    if (name.find("layernorm") != std::string::npos && !is_bias) {
      whole.fill(1.f);
    } else if (!is_bias) {
      const bool scaled = name.ends_with("linear_proj.weight") || name.ends_with("linear_fc2.weight");
      random::init_normal(whole, seed_, name, scaled ? scaled_std : cfg_.init_std);
    }
    return whole;
  };
  // Whole parameters drawn one at a time under the reference's names (init_normal is keyed by (seed,
  // name)); the Llama block's fused QKV and fc1 are built from their unfused parts (linear_q, linear_gate,
  // …, as reference/llama_layer.h draws them), so both models start from the same numbers.
  std::map<std::string, Shape> unfused;
  for (const auto& [name, shape] : gpt_parameter_shapes(cfg_)) unfused[name] = shape;
  const auto whole_of = [&](const std::string& name, const ShardSpec& spec) {
    if (cfg_.llama() && (name.ends_with("linear_qkv.weight") || name.ends_with("linear_fc1.weight")))
      return fuse_llama_weight(name, llama_layer_config(cfg_),
                               [&](const std::string& part) { return draw(part, unfused.at(part)); });
    return draw(name, spec.global_shape);
  };
  const auto keep = [&](const std::string& name, const Tensor& shard) {
    if (opt_.param_dtype == DType::f32) {
      params_[name] = shard;
    } else {
      TPSP_CHECK(opt_.param_dtype == DType::bf16, "param_dtype must be f32 or bf16, got ",
                 dtype_name(opt_.param_dtype));
      master_[name] = shard;
      params_[name] = shard.to(DType::bf16);
    }
    grads_[name] = Tensor(shard.shape(), DType::f32, opt_.device);  // main_grad: f32
  };
  for (const auto& [name, spec] : specs_) {
    // The fused fc1's stride-2 shard is lab05's (shard_linear_fc1, equal to spec.placement's).
    const Tensor whole = whole_of(name, spec);
    keep(name, (cfg_.llama() && name.ends_with("mlp.linear_fc1.weight")
                    ? shard_linear_fc1(whole, ps_.tp_rank(), ps_.tp_size())
                    : shard_of(whole, spec.placement, ps_.tp_rank(), ps_.tp_size()))
                   .to(opt_.device));
  }
  if (expert_placements_.empty()) return;
  // This EP rank's experts, each cut over its ETP group (drawn whole, one at a time, as the reference's).
  const moe::ExpertParallelState& e = *opt_.experts;
  const auto [first, count] =
      moe::ExpertParallelState::local_experts(cfg_.num_moe_experts, e.ep_size(), e.ep_rank());
  for (const auto& [name, where] : expert_placements_)
    if (where.expert >= first && where.expert < first + count)
      keep(name, shard_of(draw(name, where.global_shape), where.placement, e.etp_rank(), e.etp_size()));
}

namespace {
/// A 64-bit hash of the whole batch (shape, every id and target, in order) for the W2
/// replicated-input check, as three chunks of at most 22 bits (exact in float32). A hash, not a
/// weighted sum: differences that cancel in a sum (+2 at one position, −1 at the next) or that
/// permute positions change it.
std::array<float, 3> batch_fingerprint(const TokenBatch& ids, const TokenBatch& targets,
                                       const std::vector<int64_t>& cu_seqlens) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a over the 8 bytes of each value
  auto mix = [&h](int64_t v) {
    for (int k = 0; k < 8; ++k) h = (h ^ ((static_cast<uint64_t>(v) >> (8 * k)) & 0xff)) * 1099511628211ull;
  };
  for (int64_t v : {ids.b, ids.s, targets.b, targets.s}) mix(v);
  for (int64_t v : ids.ids) mix(v);
  for (int64_t v : targets.ids) mix(v);
  for (int64_t v : cu_seqlens) mix(v);  // packed boundaries too: ranks must agree on them
  return {static_cast<float>(h & 0x3fffff), static_cast<float>((h >> 22) & 0x3fffff),
          static_cast<float>(h >> 44)};
}
}  // namespace

namespace {
/// [b, s] → [b, s_padded] with `fill` after the real positions.
TokenBatch pad_batch(const TokenBatch& t, int64_t s_padded, int64_t fill) {
  TokenBatch out{t.b, s_padded, {}};
  for (int64_t bi = 0; bi < t.b; ++bi) {
    out.ids.insert(out.ids.end(), t.ids.begin() + bi * t.s, t.ids.begin() + (bi + 1) * t.s);
    out.ids.insert(out.ids.end(), static_cast<std::size_t>(s_padded - t.s), fill);
  }
  return out;
}
}  // namespace

void ParallelGPT::validate_batch(const TokenBatch& ids, const TokenBatch& targets) const {
  validate_tokens(ids, cfg_.vocab, false, "input ids");
  validate_tokens(targets, cfg_.vocab, true, "targets");
  TPSP_CHECK(ids.b == targets.b && ids.s == targets.s, "ids [", ids.b, ", ", ids.s, "] and targets [",
             targets.b, ", ", targets.s, "] differ in shape");
}

float ParallelGPT::forward(const TokenBatch& ids, const TokenBatch& targets, int64_t iteration) {
  comm::ProcessGroup& tp = ps_.tp();
  // Every check that can fail runs before the first collective, identically on every rank.
  validate_batch(ids, targets);
  TPSP_CHECK(ids.s <= cfg_.seq, "sequence length s=", ids.s, " exceeds the position table seq=", cfg_.seq);
  const bool pad = opt_.sequence_parallel && ids.s % tp.size() != 0;
  TPSP_CHECK(!pad || cfg_.num_moe_experts == 0, "sequence parallelism: s=", ids.s,
             " is not divisible by tp=", tp.size(),
             ", and an MoE model cannot be padded (the router would route the padding tokens and "
             "count them in the load-balancing loss)");
  TPSP_CHECK(!pad || opt_.pad_sequence, "sequence parallelism: s=", ids.s,
             " is not divisible by tp=", tp.size(), " (pad it, or set ParallelOptions::pad_sequence)");
  const int64_t s_padded = pad ? (ids.s + tp.size() - 1) / tp.size() * tp.size() : ids.s;
  TPSP_CHECK(s_padded <= cfg_.seq, "sequence length s=", ids.s, " padded to a multiple of tp=", tp.size(),
             " is ", s_padded, ", more than the position table seq=", cfg_.seq);
  if (pad) {
    Tensor mask({ids.b, s_padded});
    for (int64_t bi = 0; bi < ids.b; ++bi)
      for (int64_t si = 0; si < ids.s; ++si) mask.at({bi, si}) = 1.f;
    return forward_impl(pad_batch(ids, s_padded, 0), pad_batch(targets, s_padded, kIgnoreIndex), iteration,
                        mask, ids.s);
  }
  return forward_impl(ids, targets, iteration, Tensor(), ids.s);
}

float ParallelGPT::forward_packed(const TokenBatch& ids, const TokenBatch& targets,
                                  const PackedSeqParams& packed, int64_t iteration) {
  const int tp = ps_.tp().size();
  // Every check that can fail runs before the first collective, identically on every rank.
  validate_batch(ids, targets);
  TPSP_CHECK(ids.b == 1,
             "packed sequences: ids must be [1, T] (the sequences concatenated in one row), got [", ids.b,
             ", ", ids.s, "]");
  validate_cu_seqlens(packed.cu_seqlens, ids.s, "packed sequences");
  for (int64_t k = 0; k < packed.count(); ++k)
    TPSP_CHECK(packed.length(k) <= cfg_.seq, "packed sequences: sequence ", k, " has ", packed.length(k),
               " tokens (padding included), more than the position table seq=", cfg_.seq);
  TPSP_CHECK(!opt_.sequence_parallel || ids.s % tp == 0, "sequence parallelism: packed total ", ids.s,
             " is not divisible by tp=", tp, " (pad each sequence to a multiple of tp: pack_sequences)");
  return forward_impl(ids, targets, iteration, Tensor(), ids.s, packed.cu_seqlens);
}

float ParallelGPT::forward_impl(const TokenBatch& ids, const TokenBatch& targets, int64_t iteration,
                                const Tensor& padding, int64_t real_seq,
                                const std::vector<int64_t>& cu_seqlens) {
  comm::ProcessGroup& tp = ps_.tp();
  if (opt_.check_replicated_inputs && tp.size() > 1) {
    // max over the ranks of (f, −f): every rank holds the same fingerprint iff max == −min.
    const std::array<float, 3> f = batch_fingerprint(ids, targets, cu_seqlens);
    Tensor both = Tensor::from({6}, {f[0], f[1], f[2], -f[0], -f[1], -f[2]});
    tp.all_reduce(both, comm::ReduceOp::max, {"check.replicated_inputs"});
    bool same = true;
    for (int k = 0; k < 3; ++k) same = same && both.at(k) == -both.at(k + 3);
    TPSP_CHECK(same, "the ranks of TP group ",
               shape_str({tp.global_ranks().begin(), tp.global_ranks().end()}),
               " hold different token batches (their batch fingerprints differ; raised on world rank ",
               tp.global_rank(), "): every rank of a TP group must see identical inputs");
  }
  const int64_t s = ids.s, b = ids.b;
  auto S = std::make_shared<Saved>();
  S->ids = ids;
  S->targets.resize(static_cast<std::size_t>(s * b));
  for (int64_t si = 0; si < s; ++si)
    for (int64_t bi = 0; bi < b; ++bi) S->targets[static_cast<std::size_t>(si * b + bi)] = targets.at(bi, si);
  S->ctx = {&tp, opt_.sequence_parallel, seed_, iteration, s, b, padding, cu_seqlens, opt_.experts};
  S->real_seq = real_seq;

  // Activations are f32 whatever the parameters' dtype (bf16 parameters are widened by every op).
  Tensor x = embedding_->forward(ids, tp).to(DType::f32);
  S->seq_start = opt_.sequence_parallel ? tp.rank() * (s / tp.size()) : 0;
  if (cfg_.llama()) {  // rotary positions of the whole sequence, restarting in each packed sequence
    S->positions = rotary_positions(x.size(0), S->ctx);
  } else if (cu_seqlens.empty()) {
    ops::position_embedding_add(x, params_.at("embedding.position_embeddings.weight"), S->seq_start);
  } else {  // positions restart at 0 in each packed sequence
    for (const PositionRun& r : packed_position_runs(cu_seqlens, S->seq_start, S->seq_start + x.size(0))) {
      Tensor rows = x.slice0(r.row, r.row + r.rows);
      ops::position_embedding_add(rows, params_.at("embedding.position_embeddings.weight"), r.position);
    }
  }
  S->drop_emb = {
      seed_, ops::dropout_stream("embedding", iteration), {s, b, cfg_.hidden}, {S->seq_start, 0, 0}};
  x = ops::dropout_forward(x, cfg_.dropout, S->drop_emb);

  S->layers.resize(layers_.size());
  S->llama_layers.resize(llama_layers_.size());
  for (std::size_t i = 0; i < layers_.size() + llama_layers_.size(); ++i) {
    trace::Span span("layer.forward", "decoder.layers." + std::to_string(i));
    x = cfg_.llama() ? llama_layers_[i].forward(x, S->llama_layers[i], S->ctx, S->positions)
                     : layers_[i].forward(x, S->layers[i], S->ctx);
  }

  S->x_final = x;
  if (cfg_.llama()) {
    S->rmsf = ops::rmsnorm_forward(x, params_.at("decoder.final_layernorm.weight"), cfg_.ln_eps);
  } else {
    S->lnf = ops::layernorm_forward(x, params_.at("decoder.final_layernorm.weight"),
                                    params_.at("decoder.final_layernorm.bias"), cfg_.ln_eps);
  }
  S->logits = output_layer_->forward(cfg_.llama() ? S->rmsf.y : S->lnf.y, S->out_in, tp);
  const int64_t vl = S->logits.size(2);
  saved_ = S;
  if (opt_.device != Device::cpu && tp.size() == 1) {  // the whole vocabulary here: the device's op
    S->device_ce = true;
    return ops::cross_entropy_forward(S->logits.reshape({s * b, vl}), S->targets, cfg_.label_smoothing).loss;
  }
  // Host code (lab02): on a device the logits come to the host and the gradient goes back in backward.
  const auto ce = tensor_parallel::vocab_parallel_cross_entropy_forward(
      S->logits.reshape({s * b, vl}).to(Device::cpu), S->targets, cfg_.vocab, cfg_.label_smoothing, tp,
      S->ce);
  return ce.loss;
}

Tensor ParallelGPT::logits_local() const {
  TPSP_CHECK(saved_ != nullptr, "logits_local() called before forward()");
  const Tensor l = saved_->logits.to(Device::cpu);  // [s, b, V_local] → [b, s, V_local]
  const int64_t s = saved_->real_seq, b = l.size(1), v = l.size(2);
  Tensor out({b, s, v});
  for (int64_t si = 0; si < s; ++si)
    for (int64_t bi = 0; bi < b; ++bi)
      std::copy(l.data() + (si * b + bi) * v, l.data() + (si * b + bi + 1) * v,
                out.data() + (bi * s + si) * v);
  return out;
}

float ParallelGPT::aux_loss() const {
  TPSP_CHECK(saved_ != nullptr, "aux_loss() called before forward()");
  float sum = 0.f;
  for (const LlamaLayerSaved& l : saved_->llama_layers) sum += l.aux_loss;
  return sum;
}

const std::vector<int64_t>& ParallelGPT::rope_positions() const {
  TPSP_CHECK(saved_ != nullptr, "rope_positions() called before forward()");
  return saved_->positions;
}

void ParallelGPT::zero_grad() {
  for (auto& [name, g] : grads_) g.fill(0.f);
}

void ParallelGPT::backward_micro_batch(float loss_scale) {
  TPSP_CHECK(saved_ != nullptr, "backward() called before forward()");
  const Saved& S = *saved_;
  comm::ProcessGroup& tp = ps_.tp();
  const int64_t s = S.ids.s, b = S.ids.b;

  const int64_t vl = S.logits.size(2);
  Tensor dlogits =
      S.device_ce
          ? ops::cross_entropy_backward(S.logits.reshape({s * b, vl}), S.targets, loss_scale,
                                        cfg_.label_smoothing)
          : tensor_parallel::vocab_parallel_cross_entropy_backward(S.ce, loss_scale, tp).to(opt_.device);
  dlogits = dlogits.reshape({s, b, vl});
  Tensor dx = output_layer_->backward(dlogits, S.out_in, tp);
  if (cfg_.llama()) {
    dx = ops::rmsnorm_backward(dx, S.x_final, params_.at("decoder.final_layernorm.weight"), S.rmsf.rstd,
                               grads_.at("decoder.final_layernorm.weight"));
  } else {
    ops::LayerNormGrads gf = ops::layernorm_backward(
        dx, S.x_final, params_.at("decoder.final_layernorm.weight"), S.lnf.mean, S.lnf.rstd);
    ops::add_(grads_.at("decoder.final_layernorm.weight"), gf.dgamma);
    ops::add_(grads_.at("decoder.final_layernorm.bias"), gf.dbeta);
    dx = gf.dx;
  }
  for (std::size_t i = layers_.size() + llama_layers_.size(); i-- > 0;) {
    trace::Span span("layer.backward", "decoder.layers." + std::to_string(i));
    dx = cfg_.llama() ? llama_layers_[i].backward(dx, S.llama_layers[i], S.ctx, loss_scale)
                      : layers_[i].backward(dx, S.layers[i], S.ctx);
  }

  Tensor demb = ops::dropout_backward(dx, cfg_.dropout, S.drop_emb);
  if (cfg_.llama()) {
    embedding_->backward(demb, S.ids, tp);
    return;
  }
  Tensor& dwpe = grads_.at("embedding.position_embeddings.weight");
  if (S.ctx.cu_seqlens.empty()) {
    ops::add_(dwpe, ops::position_embedding_backward(demb, cfg_.seq, S.seq_start));
  } else {
    for (const PositionRun& r :
         packed_position_runs(S.ctx.cu_seqlens, S.seq_start, S.seq_start + demb.size(0)))
      ops::add_(dwpe,
                ops::position_embedding_backward(demb.slice0(r.row, r.row + r.rows), cfg_.seq, r.position));
  }
  embedding_->backward(demb, S.ids, tp);
}

void ParallelGPT::finalize_grads() {
  std::vector<Tensor*> sp, all;
  for (auto& [name, g] : grads_) {
    if (expert_placements_.contains(name)) continue;  // over the edp group: finalize_moe_grads below
    // Partial over TP: replicated parameters under SP, and the per-head q/k_layernorm weights always.
    // The Llama block's RMSNorm weights: lab05's rule (the same as the specs' flags).
    const bool partial = cfg_.llama() && name.ends_with("layernorm.weight")
                             ? norm_grad_partial_over_tp(name, opt_.sequence_parallel)
                             : specs_.at(name).sequence_parallel || specs_.at(name).partial_over_tp;
    if (partial) sp.push_back(&g);
    all.push_back(&g);
  }
  if (!sp.empty()) allreduce_sequence_parallel_grads(sp, ps_.tp());
  allreduce_data_parallel_grads(all, ps_.dp());
  // The experts: summed over their edp group, scaled by 1/dp. The router, replicated over TP, was summed
  // over TP with the SP gradients above (its spec is sequence_parallel) and averaged over DP.
  for (LlamaLayer& l : llama_layers_)
    if (l.config().moe()) finalize_moe_grads(l.moe_grads(), *opt_.experts, nullptr, ps_.dp_size());
}

void ParallelGPT::backward() {
  zero_grad();
  backward_micro_batch(1.f);
  finalize_grads();
}

void ParallelGPT::step(const ops::AdamWConfig& opt) {
  ++steps_;
  for (auto& [name, p] : params_) {
    const auto master = master_.find(name);
    Tensor& target = master == master_.end() ? p : master->second;
    ops::adamw_step(target, grads_.at(name), opt_state_[name], steps_, opt);
    if (master != master_.end()) p.copy_from(target);  // round the f32 master into the bf16 parameter
  }
}

float ParallelGPT::train_step(const std::vector<MicroBatch>& micro_batches, int64_t iteration,
                              const ops::AdamWConfig& opt) {
  TPSP_CHECK(!micro_batches.empty(), "train_step: no micro-batch");
  const float scale = 1.f / static_cast<float>(micro_batches.size());
  zero_grad();
  double loss = 0;
  for (const MicroBatch& mb : micro_batches) {
    loss += forward(mb.ids, mb.targets, iteration);
    backward_micro_batch(scale);
  }
  finalize_grads();
  step(opt);
  return static_cast<float>(loss * scale);
}

std::vector<std::size_t> ParallelGPT::activation_bytes_per_layer() const {
  std::vector<std::size_t> out;
  if (!saved_) return out;
  for (const LayerSaved& l : saved_->layers) out.push_back(l.bytes());
  for (const LlamaLayerSaved& l : saved_->llama_layers) out.push_back(l.bytes());
  return out;
}

}  // namespace tpsp::model
