#include "reference/gpt.h"

#include <cmath>

#include "engine/error.h"
#include "engine/random/init.h"

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

/// Activations one layer keeps for backward ([s, b, ·] each).
struct GPT::LayerActs {
  Tensor x_in;                     // residual stream entering the layer [s, b, h]
  ops::LayerNormOut ln1;           // input_layernorm output and stats
  Tensor qkv;                      // [s, b, 3h]
  ops::AttentionOut attn;          // out [s, b, h], probs [b, heads, s, s]
  Tensor x_mid;                    // residual after attention [s, b, h]
  ops::LayerNormOut ln2;           // pre_mlp_layernorm
  Tensor fc1;                      // pre-activation [s, b, ffn]
  Tensor act;                      // GELU(fc1) [s, b, ffn]
  ops::AttentionOptions attn_opt;  // heads, dropout key
  ops::DropoutKey drop_attn, drop_mlp;
};

/// Everything the last forward kept.
struct GPT::Acts {
  TokenBatch ids;
  std::vector<int64_t> targets;  // sequence-first flattening
  ops::DropoutKey drop_emb;
  std::vector<LayerActs> layers;
  Tensor x_final;  // input of the final LayerNorm [s, b, h]
  ops::LayerNormOut lnf;
  Tensor logits;  // [s, b, V]
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
  ops::position_embedding_add(x, params_.at("embedding.position_embeddings.weight"));
  acts->drop_emb = {seed_, ops::dropout_stream("embedding", iteration), sbh, {}};
  x = ops::dropout_forward(x, c.dropout, acts->drop_emb);

  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = layer_prefix(i);
    LayerActs& L = acts->layers.emplace_back();
    L.x_in = x;
    L.ln1 = ops::layernorm_forward(x, params_.at(p + "input_layernorm.weight"),
                                   params_.at(p + "input_layernorm.bias"), c.ln_eps);
    L.qkv = ops::matmul_forward(L.ln1.y, params_.at(p + "self_attention.linear_qkv.weight"));
    ops::bias_add_forward(L.qkv, params_.at(p + "self_attention.linear_qkv.bias"));
    L.attn_opt.heads = c.heads;
    L.attn_opt.dropout_p = c.dropout;
    L.attn_opt.dropout_key = {seed_, ops::dropout_stream(p + "attention", iteration), {b, c.heads, s, s}, {}};
    L.attn = ops::attention_forward(L.qkv, L.attn_opt);
    Tensor proj = ops::matmul_forward(L.attn.out, params_.at(p + "self_attention.linear_proj.weight"));
    ops::bias_add_forward(proj, params_.at(p + "self_attention.linear_proj.bias"));
    L.drop_attn = {seed_, ops::dropout_stream(p + "hidden_attn", iteration), sbh, {}};
    L.x_mid = ops::add(x, ops::dropout_forward(proj, c.dropout, L.drop_attn));

    L.ln2 = ops::layernorm_forward(L.x_mid, params_.at(p + "pre_mlp_layernorm.weight"),
                                   params_.at(p + "pre_mlp_layernorm.bias"), c.ln_eps);
    L.fc1 = ops::matmul_forward(L.ln2.y, params_.at(p + "mlp.linear_fc1.weight"));
    ops::bias_add_forward(L.fc1, params_.at(p + "mlp.linear_fc1.bias"));
    L.act = ops::gelu_forward(L.fc1);
    Tensor fc2 = ops::matmul_forward(L.act, params_.at(p + "mlp.linear_fc2.weight"));
    ops::bias_add_forward(fc2, params_.at(p + "mlp.linear_fc2.bias"));
    L.drop_mlp = {seed_, ops::dropout_stream(p + "hidden_mlp", iteration), sbh, {}};
    x = ops::add(L.x_mid, ops::dropout_forward(fc2, c.dropout, L.drop_mlp));
  }

  acts->x_final = x;
  acts->lnf = ops::layernorm_forward(x, params_.at("decoder.final_layernorm.weight"),
                                     params_.at("decoder.final_layernorm.bias"), c.ln_eps);
  const Tensor& w_out = params_.at(c.tied ? "embedding.word_embeddings.weight" : "output_layer.weight");
  acts->logits = ops::matmul_forward(acts->lnf.y, w_out);
  const ops::CrossEntropyOut ce =
      ops::cross_entropy_forward(acts->logits.reshape({s * b, c.vocab}), acts->targets, c.label_smoothing);
  acts->loss = ce.loss;
  acts_ = acts;
  return ce.loss;
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
  ops::MatmulGrads out_g = ops::matmul_backward(dlogits, A.lnf.y, params_.at(w_out_name));
  acc(w_out_name, out_g.dw);
  ops::LayerNormGrads lnf_g = ops::layernorm_backward(
      out_g.dx, A.x_final, params_.at("decoder.final_layernorm.weight"), A.lnf.mean, A.lnf.rstd);
  acc("decoder.final_layernorm.weight", lnf_g.dgamma);
  acc("decoder.final_layernorm.bias", lnf_g.dbeta);
  Tensor dx = lnf_g.dx;

  for (int64_t i = c.layers - 1; i >= 0; --i) {
    const std::string p = layer_prefix(i);
    const LayerActs& L = A.layers[static_cast<std::size_t>(i)];
    // MLP block: x = x_mid + dropout(fc2(gelu(fc1(ln2(x_mid))))).
    Tensor dfc2 = ops::dropout_backward(dx, c.dropout, L.drop_mlp);
    acc(p + "mlp.linear_fc2.bias", ops::bias_add_backward(dfc2));
    ops::MatmulGrads fc2_g = ops::matmul_backward(dfc2, L.act, params_.at(p + "mlp.linear_fc2.weight"));
    acc(p + "mlp.linear_fc2.weight", fc2_g.dw);
    Tensor dfc1 = ops::gelu_backward(fc2_g.dx, L.fc1);
    acc(p + "mlp.linear_fc1.bias", ops::bias_add_backward(dfc1));
    ops::MatmulGrads fc1_g = ops::matmul_backward(dfc1, L.ln2.y, params_.at(p + "mlp.linear_fc1.weight"));
    acc(p + "mlp.linear_fc1.weight", fc1_g.dw);
    ops::LayerNormGrads ln2_g = ops::layernorm_backward(
        fc1_g.dx, L.x_mid, params_.at(p + "pre_mlp_layernorm.weight"), L.ln2.mean, L.ln2.rstd);
    acc(p + "pre_mlp_layernorm.weight", ln2_g.dgamma);
    acc(p + "pre_mlp_layernorm.bias", ln2_g.dbeta);
    ops::add_(dx, ln2_g.dx);  // dx now holds d(x_mid)

    // Attention block: x_mid = x_in + dropout(proj(attn(qkv(ln1(x_in))))).
    Tensor dproj = ops::dropout_backward(dx, c.dropout, L.drop_attn);
    acc(p + "self_attention.linear_proj.bias", ops::bias_add_backward(dproj));
    ops::MatmulGrads proj_g =
        ops::matmul_backward(dproj, L.attn.out, params_.at(p + "self_attention.linear_proj.weight"));
    acc(p + "self_attention.linear_proj.weight", proj_g.dw);
    Tensor dqkv = ops::attention_backward(proj_g.dx, L.qkv, L.attn.probs, L.attn_opt);
    acc(p + "self_attention.linear_qkv.bias", ops::bias_add_backward(dqkv));
    ops::MatmulGrads qkv_g =
        ops::matmul_backward(dqkv, L.ln1.y, params_.at(p + "self_attention.linear_qkv.weight"));
    acc(p + "self_attention.linear_qkv.weight", qkv_g.dw);
    ops::LayerNormGrads ln1_g = ops::layernorm_backward(
        qkv_g.dx, L.x_in, params_.at(p + "input_layernorm.weight"), L.ln1.mean, L.ln1.rstd);
    acc(p + "input_layernorm.weight", ln1_g.dgamma);
    acc(p + "input_layernorm.bias", ln1_g.dbeta);
    ops::add_(dx, ln1_g.dx);  // dx now holds d(x_in)
  }

  Tensor demb = ops::dropout_backward(dx, c.dropout, A.drop_emb);
  acc("embedding.position_embeddings.weight", ops::position_embedding_backward(demb, c.seq));
  acc("embedding.word_embeddings.weight", ops::embedding_backward(demb, A.ids, c.vocab));
}

void GPT::step(const ops::AdamWConfig& opt) {
  ++steps_;
  for (auto& [name, p] : params_) ops::adamw_step(p, grads_.at(name), opt_state_[name], steps_, opt);
}

std::size_t GPT::activation_bytes() const {
  if (!acts_) return 0;
  std::size_t n = 0;
  for (const LayerActs& L : acts_->layers) {
    for (const Tensor* t : {&L.x_in, &L.ln1.y, &L.ln1.mean, &L.ln1.rstd, &L.qkv, &L.attn.out, &L.attn.probs,
                            &L.x_mid, &L.ln2.y, &L.ln2.mean, &L.ln2.rstd, &L.fc1, &L.act})
      n += t->nbytes();
  }
  return n + acts_->x_final.nbytes() + acts_->lnf.y.nbytes() + acts_->logits.nbytes();
}

}  // namespace tpsp::reference
