// TransformerLayer's parts that no lab asks for (see transformer_layer.h): its construction from the
// model's parameter and gradient maps, the shard-invariant dropout keys of the hidden activations and
// LayerSaved::bytes. lab02's tasks (forward, backward) are transformer_layer.cpp's.
#include "engine/model/layer_linear_options.h"
#include "engine/model/transformer_layer.h"

namespace tpsp::model {

std::size_t LayerSaved::bytes() const {
  std::size_t n = 0;
  for (const Tensor* t : {&x_in, &x_mid, &ln1.y, &ln1.mean, &ln1.rstd, &ln2.y, &ln2.mean, &ln2.rstd, &qkv,
                          &attn.out, &attn.probs, &fc1})
    n += t->nbytes();
  // qkv_in = ln1.y, proj_in = attn.out, fc1_in = ln2.y, fc2_in = GELU(fc1): only fc2_in is new.
  return n + fc2_in.input.nbytes();
}

TransformerLayer::TransformerLayer(const GPTConfig& cfg, int64_t index, std::map<std::string, Tensor>& P,
                                   std::map<std::string, Tensor>& G, bool sp, bool overlap)
    : cfg_(cfg),
      prefix_("decoder.layers." + std::to_string(index) + "."),
      ln1_w_(P.at(prefix_ + "input_layernorm.weight")),
      ln1_b_(P.at(prefix_ + "input_layernorm.bias")),
      ln2_w_(P.at(prefix_ + "pre_mlp_layernorm.weight")),
      ln2_b_(P.at(prefix_ + "pre_mlp_layernorm.bias")),
      dln1_w_(G.at(prefix_ + "input_layernorm.weight")),
      dln1_b_(G.at(prefix_ + "input_layernorm.bias")),
      dln2_w_(G.at(prefix_ + "pre_mlp_layernorm.weight")),
      dln2_b_(G.at(prefix_ + "pre_mlp_layernorm.bias")),
      qkv_(P.at(prefix_ + "self_attention.linear_qkv.weight"),
           P.at(prefix_ + "self_attention.linear_qkv.bias"),
           G.at(prefix_ + "self_attention.linear_qkv.weight"),
           G.at(prefix_ + "self_attention.linear_qkv.bias"), layer_linear_options(sp, overlap),
           prefix_ + "self_attention.linear_qkv"),
      fc1_(P.at(prefix_ + "mlp.linear_fc1.weight"), P.at(prefix_ + "mlp.linear_fc1.bias"),
           G.at(prefix_ + "mlp.linear_fc1.weight"), G.at(prefix_ + "mlp.linear_fc1.bias"),
           layer_linear_options(sp, overlap), prefix_ + "mlp.linear_fc1"),
      proj_(P.at(prefix_ + "self_attention.linear_proj.weight"),
            P.at(prefix_ + "self_attention.linear_proj.bias"),
            G.at(prefix_ + "self_attention.linear_proj.weight"),
            G.at(prefix_ + "self_attention.linear_proj.bias"), layer_linear_options(sp, overlap),
            prefix_ + "self_attention.linear_proj"),
      fc2_(P.at(prefix_ + "mlp.linear_fc2.weight"), P.at(prefix_ + "mlp.linear_fc2.bias"),
           G.at(prefix_ + "mlp.linear_fc2.weight"), G.at(prefix_ + "mlp.linear_fc2.bias"),
           layer_linear_options(sp, overlap), prefix_ + "mlp.linear_fc2") {}

ops::DropoutKey TransformerLayer::hidden_key(const std::string& site, const LayerContext& ctx,
                                             int64_t local_rows) const {
  // Shard-invariant: the key names the element's place in the whole [s, b, h] tensor, so the
  // shards of an SP run draw the reference's mask bits (and without SP every TP rank draws the same).
  const int64_t first_row = ctx.sequence_parallel ? ctx.tp->rank() * local_rows : 0;
  return {ctx.seed,
          ops::dropout_stream(prefix_ + site, ctx.iteration),
          {ctx.seq, ctx.batch, cfg_.hidden},
          {first_row, 0, 0}};
}

}  // namespace tpsp::model
