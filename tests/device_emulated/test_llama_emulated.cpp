// The tensor-parallel Llama layer (engine/model/llama_layer.h) on the emulated device against the CPU, bit
// for bit: every device path of the layer (fused shards, gathered QKV activation, column slices and
// concatenations of device tensors, RMSNorm, RoPE with its host table, SwiGLU, grouped-query attention)
// runs in CI without a GPU, and a host read of a device tensor would raise as on a GPU. The emulated
// device runs the CPU's ops, so any difference is a device path that computes something else.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "engine/model/llama_layer.h"
#include "engine/runtime/device_runtime.h"
#include "tests/ops/helpers.h"
#include "tests/tp/tp_util.h"

using namespace tpsp;
using namespace tpsp::testing;

namespace {

/// The layer's y, dx and gradients on `device` (shards and inputs moved there), back on the host.
std::map<std::string, Tensor> run_on(Device device, const model::LlamaLayerConfig& cfg,
                                     const std::map<std::string, Tensor>& whole, comm::ProcessGroup& tp,
                                     bool sp, const Tensor& x, const Tensor& dy) {
  std::map<std::string, Tensor> P, G, out;
  for (const auto& [name, t] : model::shard_llama_layer(whole, cfg, "", tp.rank(), tp.size())) {
    P[name] = t.to(device);
    G[name] = Tensor(t.shape(), DType::f32, device);
  }
  model::LlamaLayer layer(cfg, "", P, G, tp.size(), sp);
  const int64_t s = 8, b = 2, rows = sp ? s / tp.size() : s;
  const model::LayerContext ctx{&tp, sp, 0, 0, s, b, Tensor(), {}};
  model::LlamaLayerSaved saved;
  const auto mine = [&](const Tensor& t) {
    return t.slice0(sp ? tp.rank() * rows : 0, sp ? (tp.rank() + 1) * rows : s).clone().to(device);
  };
  out["y"] = layer.forward(mine(x), saved, ctx).to(Device::cpu);
  out["dx"] = layer.backward(mine(dy), saved, ctx).to(Device::cpu);
  for (const auto& [name, g] : G) {
    expect(g.device() == device, "gradient " + name + " left the device");
    out["grad " + name] = g.to(Device::cpu);
  }
  return out;
}

}  // namespace

TEST_CASE("device: the Llama layer at tp=2 (+SP), groups 2 and 1 (gathered QKV), qk_layernorm: bit for bit") {
  for (const int64_t groups : {2, 1}) {
    for (const bool sp : {false, true}) {
      CAPTURE(groups);
      CAPTURE(sp);
      auto fn = [&](int) {
        runtime::activate(runtime::DeviceChoice::cuda_emulated);
        auto tp = runtime::init_world(runtime::DeviceChoice::cuda_emulated, "gloo");
        const model::LlamaLayerConfig cfg{
            .hidden = 16, .heads = 4, .num_query_groups = groups, .ffn = 24, .qk_layernorm = true};
        std::map<std::string, Tensor> whole;
        uint32_t seed = 500;
        const int64_t d = 4;
        for (const auto& [name, shape] :
             std::map<std::string, Shape>{{"input_layernorm.weight", {16}},
                                          {"pre_mlp_layernorm.weight", {16}},
                                          {"self_attention.q_layernorm.weight", {d}},
                                          {"self_attention.k_layernorm.weight", {d}},
                                          {"self_attention.linear_q.weight", {16, 16}},
                                          {"self_attention.linear_k.weight", {groups * d, 16}},
                                          {"self_attention.linear_v.weight", {groups * d, 16}},
                                          {"self_attention.linear_proj.weight", {16, 16}},
                                          {"mlp.linear_gate.weight", {24, 16}},
                                          {"mlp.linear_up.weight", {24, 16}},
                                          {"mlp.linear_fc2.weight", {16, 24}}})
          whole[name] = test::rand_tensor(shape, seed++, -0.4f, 0.4f);
        const Tensor x = test::rand_tensor({8, 2, 16}, 51), dy = test::rand_tensor({8, 2, 16}, 52);
        const auto cpu = run_on(Device::cpu, cfg, whole, *tp, sp, x, dy);
        const auto dev = run_on(Device::cuda, cfg, whole, *tp, sp, x, dy);
        for (const auto& [name, t] : cpu) expect_close(dev.at(name), t, 0.0, 0.0, name);
      };
      const std::string f = failures(run_ranks(2, fn, 120));
      CHECK_MESSAGE(f.empty(), f);
    }
  }
}
