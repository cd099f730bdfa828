#include "reference/gpt.h"

#include <cmath>

#include "engine/error.h"
#include "engine/ops/rmsnorm.h"
#include "engine/random/init.h"
#include "reference/llama_layer.h"

namespace tpsp::reference {

namespace {

std::string layer_prefix(int64_t i) {
  return "decoder.layers." + std::to_string(i) + ".";
}

/// Transposes logits [s, b, V] (sequence-first) to [b, s, V] (batch-first), or back.
Tensor swap01(const Tensor& x) {
  const int64_t d0 = x.size(0), d1 = x.size(1), inner = x.numel() / (d0 * d1);
  Tensor out({d1, d0, x.size(2)});
  for (int64_t i = 0; i < d0; ++i)
    for (int64_t j = 0; j < d1; ++j)
      std::copy(x.data() + (i * d1 + j) * inner, x.data() + (i * d1 + j + 1) * inner,
                out.data() + (j * d0 + i) * inner);
  return out;
}

/// Targets [b, s] batch-first, flattened in sequence-first order to match logits [s, b, V] rows.
std::vector<int64_t> targets_seq_first(const TokenBatch& t) {
  std::vector<int64_t> out(static_cast<std::size_t>(t.b * t.s));
  for (int64_t si = 0; si < t.s; ++si)
    for (int64_t bi = 0; bi < t.b; ++bi) out[static_cast<std::size_t>(si * t.b + bi)] = t.at(bi, si);
  return out;
}

}  // namespace

/// Everything the last forward kept.
struct GPT::Acts {
  TokenBatch ids;
  std::vector<int64_t> targets;  // sequence-first flattening
  ops::DropoutKey drop_emb;
  LayerSpec spec;
  std::vector<LayerActs> layers;
  std::vector<LlamaLayerSpec>
      llama_specs;  // the Llama block's, per layer (cfg.llama()) instead of spec/layers
  std::vector<LlamaLayerActs> llama_layers;
  Tensor x_final;  // input of the final norm [s, b, h]
  ops::LayerNormOut lnf;
  ops::RMSNormOut rmsf;  // the Llama block's final RMSNorm
  Tensor logits;         // [s, b, V]
  float loss = 0.f;
};

GPT::GPT(const GPTConfig& cfg, uint64_t seed) : cfg_(cfg), seed_(seed) {
  cfg_.validate();
  const float scaled_std = cfg_.init_std / std::sqrt(2.f * static_cast<float>(cfg_.layers));
  for (const auto& [name, shape] : gpt_parameter_shapes(cfg_)) {
    Tensor t(shape);
    const bool is_bias = name.ends_with(".bias");
    const bool is_norm = name.find("layernorm") != std::string::npos;
    if (is_norm && !is_bias) {
      t.fill(1.f);
    } else if (!is_bias) {
      const bool scaled = name.ends_with("linear_proj.weight") || name.ends_with("linear_fc2.weight");
      random::init_normal(t, seed_, name, scaled ? scaled_std : cfg_.init_std);
    }
    params_[name] = t;
    grads_[name] = Tensor(shape);
  }
}

float GPT::forward(const TokenBatch& ids, const TokenBatch& targets, int64_t iteration) {
  const GPTConfig& c = cfg_;
  validate_tokens(ids, c.vocab, false, "input ids");
  validate_tokens(targets, c.vocab, true, "targets");
  TPSP_CHECK(ids.b == targets.b && ids.s == targets.s, "ids [", ids.b, ", ", ids.s, "] and targets [",
             targets.b, ", ", targets.s, "] differ in shape");
  TPSP_CHECK(ids.s <= c.seq, "sequence length s=", ids.s, " exceeds the position table seq=", c.seq);
  const int64_t s = ids.s, b = ids.b, h = c.hidden;
  const Shape sbh{s, b, h};
  auto acts = std::make_shared<Acts>();
  acts->ids = ids;
  acts->targets = targets_seq_first(targets);

  Tensor x = ops::embedding_forward(ids, params_.at("embedding.word_embeddings.weight"));
  if (!c.llama()) ops::position_embedding_add(x, params_.at("embedding.position_embeddings.weight"));
  acts->drop_emb = {seed_, ops::dropout_stream("embedding", iteration), sbh, {}};
  x = ops::dropout_forward(x, c.dropout, acts->drop_emb);

  if (c.llama()) {
    acts->llama_layers.resize(static_cast<std::size_t>(c.layers));
    for (int64_t i = 0; i < c.layers; ++i) {
      LlamaLayerSpec spec{.hidden = h,
                          .heads = c.heads,
                          .query_groups = c.num_query_groups,
                          .ffn = c.ffn_hidden(),
                          .norm_eps = c.ln_eps,
                          .rotary_base = c.rotary_base,
                          .qk_layernorm = c.qk_layernorm,
                          .positions = {},
                          .cu_seqlens = {}};
      if (c.moe_layer(i))
        spec.moe = {h, c.moe_ffn(), c.num_moe_experts, c.moe_router_topk, c.moe_aux_loss_coeff};
      acts->llama_specs.push_back(spec);
      x = llama_layer_forward(x, params_, layer_prefix(i), spec,
                              acts->llama_layers[static_cast<std::size_t>(i)]);
    }
  } else {
    const LayerSpec spec{h, c.heads, c.ln_eps, c.dropout, seed_, iteration};
    acts->layers.resize(static_cast<std::size_t>(c.layers));
    for (int64_t i = 0; i < c.layers; ++i)
      x = layer_forward(x, params_, layer_prefix(i), spec, acts->layers[static_cast<std::size_t>(i)]);
    acts->spec = spec;
  }

  acts->x_final = x;
  Tensor y;
  if (c.llama()) {
    acts->rmsf = ops::rmsnorm_forward(x, params_.at("decoder.final_layernorm.weight"), c.ln_eps);
    y = acts->rmsf.y;
  } else {
    acts->lnf = ops::layernorm_forward(x, params_.at("decoder.final_layernorm.weight"),
                                       params_.at("decoder.final_layernorm.bias"), c.ln_eps);
    y = acts->lnf.y;
  }
  const Tensor& w_out = params_.at(c.tied ? "embedding.word_embeddings.weight" : "output_layer.weight");
  acts->logits = ops::matmul_forward(y, w_out);
  const ops::CrossEntropyOut ce =
      ops::cross_entropy_forward(acts->logits.reshape({s * b, c.vocab}), acts->targets, c.label_smoothing);
  acts->loss = ce.loss;
  acts_ = acts;
  return ce.loss;
}

float GPT::aux_loss() const {
  TPSP_CHECK(acts_ != nullptr, "aux_loss() called before forward()");
  float sum = 0.f;
  for (const LlamaLayerActs& L : acts_->llama_layers) sum += L.moe.aux_loss;
  return sum;
}

Tensor GPT::logits() const {
  TPSP_CHECK(acts_ != nullptr, "logits() called before forward()");
  return swap01(acts_->logits);
}

void GPT::backward() {
  TPSP_CHECK(acts_ != nullptr, "backward() called before forward()");
  const GPTConfig& c = cfg_;
  const Acts& A = *acts_;
  const int64_t s = A.ids.s, b = A.ids.b;
  for (auto& [name, g] : grads_) g.fill(0.f);
  auto acc = [this](const std::string& name, const Tensor& g) { ops::add_(grads_.at(name), g); };

  const std::string w_out_name = c.tied ? "embedding.word_embeddings.weight" : "output_layer.weight";
  Tensor dlogits =
      ops::cross_entropy_backward(A.logits.reshape({s * b, c.vocab}), A.targets, 1.f, c.label_smoothing)
          .reshape({s, b, c.vocab});
  ops::MatmulGrads out_g =
      ops::matmul_backward(dlogits, c.llama() ? A.rmsf.y : A.lnf.y, params_.at(w_out_name));
  acc(w_out_name, out_g.dw);
  Tensor dx;
  if (c.llama()) {
    dx = ops::rmsnorm_backward(out_g.dx, A.x_final, params_.at("decoder.final_layernorm.weight"), A.rmsf.rstd,
                               grads_.at("decoder.final_layernorm.weight"));
    for (int64_t i = c.layers - 1; i >= 0; --i)
      dx = llama_layer_backward(dx, params_, layer_prefix(i), A.llama_specs[static_cast<std::size_t>(i)],
                                A.llama_layers[static_cast<std::size_t>(i)], grads_);
  } else {
    ops::LayerNormGrads lnf_g = ops::layernorm_backward(
        out_g.dx, A.x_final, params_.at("decoder.final_layernorm.weight"), A.lnf.mean, A.lnf.rstd);
    acc("decoder.final_layernorm.weight", lnf_g.dgamma);
    acc("decoder.final_layernorm.bias", lnf_g.dbeta);
    dx = lnf_g.dx;
    for (int64_t i = c.layers - 1; i >= 0; --i)
      dx =
          layer_backward(dx, params_, layer_prefix(i), A.spec, A.layers[static_cast<std::size_t>(i)], grads_);
  }

  Tensor demb = ops::dropout_backward(dx, c.dropout, A.drop_emb);
  if (!c.llama()) acc("embedding.position_embeddings.weight", ops::position_embedding_backward(demb, c.seq));
  acc("embedding.word_embeddings.weight", ops::embedding_backward(demb, A.ids, c.vocab));
}

void GPT::step(const ops::AdamWConfig& opt) {
  ++steps_;
  for (auto& [name, p] : params_) ops::adamw_step(p, grads_.at(name), opt_state_[name], steps_, opt);
}

std::size_t GPT::activation_bytes() const {
  if (!acts_) return 0;
  std::size_t n = 0;
  for (const LayerActs& L : acts_->layers) n += L.bytes();
  for (const LlamaLayerActs& L : acts_->llama_layers) n += L.bytes();
  return n + acts_->x_final.nbytes() + acts_->lnf.y.nbytes() + acts_->rmsf.y.nbytes() +
         acts_->rmsf.rstd.nbytes() + acts_->logits.nbytes();
}

}  // namespace tpsp::reference
