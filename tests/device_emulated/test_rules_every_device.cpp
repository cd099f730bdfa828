// Every op's argument rule is checked once, above the devices (engine/ops/rules.h): a bad call raises
// the same error, with the same message, whether its tensors are on the CPU or on a device, before
// any device code runs. Each case below is one rule of one op; it runs on CPU tensors and on the
// emulated device's "cuda" tensors (engine/emulated_device.h) with the device's ops unregistered, so
// a rule that lived in a device's kernels instead of the dispatch would surface as "no cuda ops are
// registered", not as its message. The two messages must be equal and name the op. The value errors
// only a kernel can see (a NaN logit) are compared with the emulated ops in place.
#include <doctest/doctest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/emulated_device.h"
#include "engine/error.h"
#include "engine/ops/device_ops.h"
#include "engine/ops/ops.h"

using namespace tpsp;

namespace {

/// Places every tensor of a call: as it is (the CPU) or on the emulated device.
struct On {
  Device device;
  Tensor operator()(const Shape& shape, DType dt = DType::f32) const {
    return Tensor(shape, DType::f32, Device::cpu).to(dt).to(device);
  }
};

/// The message of the error `call` raises on `device` (its what()), and whether it was a ShapeError.
struct Raised {
  std::string message;
  bool shape_error = false;
};
Raised raised(const std::function<void(const On&)>& call, Device device) {
  try {
    call(On{device});
  } catch (const ShapeError& e) {
    return {e.what(), true};
  } catch (const std::exception& e) {
    return {e.what(), false};
  }
  return {"(nothing raised)", false};
}

struct Case {
  const char* op;
  std::function<void(const On&)> call;
  bool shape_error = true;  // else a NumericError from a kernel
};

std::vector<Case> cases() {
  ops::AttentionOptions packed;
  packed.heads = 1;
  packed.cu_seqlens = {0, 2};
  ops::AttentionOptions one_head;
  one_head.heads = 1;
  ops::DropoutKey outside;
  outside.global_shape = {4, 2};
  outside.offset = {3, 0};
  const TokenBatch short_ids{2, 3, {1, 2, 3}};
  return {
      {"matmul_forward",
       [](const On& t) {
         ops::matmul_forward(t({2, 3}), t({4, 5}));
       }},
      {"matmul_dgrad",
       [](const On& t) {
         ops::matmul_dgrad(t({2, 4}), t({5, 3}));
       }},
      {"matmul_wgrad",
       [](const On& t) {
         Tensor dw = t({4, 2});
         ops::matmul_wgrad(t({2, 4}), t({2, 3}), dw);
       }},
      {"matmul_wgrad",
       [](const On& t) {
         Tensor dw = t({4, 3}, DType::bf16);
         ops::matmul_wgrad(t({2, 4}), t({2, 3}), dw);
       }},
      {"matmul_backward",
       [](const On& t) {
         ops::matmul_backward(t({2, 5}), t({2, 3}), t({4, 3}));
       }},
      {"bias_add_forward",
       [](const On& t) {
         Tensor y = t({2, 3});
         ops::bias_add_forward(y, t({4}));
       }},
      {"bias_add_backward", [](const On& t) { ops::bias_add_backward(t({})); }},
      {"add",
       [](const On& t) {
         ops::add(t({2, 3}), t({3, 2}));
       }},
      {"add_",
       [](const On& t) {
         Tensor a = t({2, 3});
         ops::add_(a, t({3, 2}));
       }},
      {"gelu_backward", [](const On& t) { ops::gelu_backward(t({2}), t({3})); }},
      {"layernorm_forward",
       [](const On& t) {
         ops::layernorm_forward(t({2, 4}), t({3}), t({4}));
       }},
      {"layernorm_backward",
       [](const On& t) {
         ops::layernorm_backward(t({2, 4}), t({2, 4}), t({4}), t({3}), t({2}));
       }},
      {"rmsnorm_forward",
       [](const On& t) {
         ops::rmsnorm_forward(t({2, 4}), t({3}));
       }},
      {"rmsnorm_forward",
       [](const On& t) {
         ops::rmsnorm_forward(t({2, 4}), t({4}), -1.f);
       }},
      {"rmsnorm_backward",
       [](const On& t) {
         Tensor dw = t({4}, DType::bf16);
         ops::rmsnorm_backward(t({2, 4}), t({2, 4}), t({4}), t({2}), dw);
       }},
      {"swiglu_forward",
       [](const On& t) {
         ops::swiglu_forward(t({2, 5}));
       }},
      {"rope_forward",
       [](const On& t) {
         ops::rope_forward(t({2, 1, 6}), {0, 1}, 3);
       }},
      {"softmax_forward", [](const On& t) { ops::softmax_forward(t({})); }},
      {"softmax_backward",
       [](const On& t) {
         ops::softmax_backward(t({2, 3}), t({2, 4}));
       }},
      {"attention_forward",
       [one_head](const On& t) {
         ops::attention_forward(t({2, 1, 7}), one_head);
       }},
      {"attention_forward",
       [packed](const On& t) {
         ops::attention_forward(t({2, 2, 6}), packed);
       }},
      {"attention_forward",
       [](const On& t) {
         ops::AttentionOptions gqa;
         gqa.heads = 6;
         gqa.query_groups = 4;  // 6 % 4 != 0
         ops::attention_forward(t({2, 1, 24}), gqa);
       }},
      {"attention_forward",
       [](const On& t) {
         ops::AttentionOptions gqa;
         gqa.heads = 4;
         gqa.query_groups = 2;  // width 2·(2 + 2) = 8 per unit of d: 12 is not a multiple
         ops::attention_forward(t({2, 1, 12}), gqa);
       }},
      {"attention_backward",
       [one_head](const On& t) {
         ops::attention_backward(t({2, 1, 3}), t({2, 1, 6}), t({1, 1, 2, 2}), one_head);
       }},
      {"embedding_forward",
       [short_ids](const On& t) {
         ops::embedding_forward(short_ids, t({5, 4}));
       }},
      {"embedding_backward",
       [](const On& t) {
         ops::embedding_backward(t({3, 2, 4}), TokenBatch{1, 2, {0, 1}}, 5);
       }},
      {"position_embedding_add",
       [](const On& t) {
         Tensor x = t({3, 1, 4});
         ops::position_embedding_add(x, t({4, 4}), 2);
       }},
      {"position_embedding_backward",
       [](const On& t) {
         ops::position_embedding_backward(t({3, 1, 4}), 4, -1);
       }},
      {"cross_entropy_forward",
       [](const On& t) {
         ops::cross_entropy_forward(t({2, 3}), {0, 3});
       }},
      {"cross_entropy_backward",
       [](const On& t) {
         ops::cross_entropy_backward(t({2, 3}), {0, 1}, 1.f, 2.f);
       }},
      {"dropout",
       [](const On& t) {
         ops::dropout_forward(t({2, 2}), 1.f, {});
       }},
      {"dropout",
       [outside](const On& t) {
         ops::dropout_backward(t({2, 2}), 0.5f, outside);
       }},
      {"adamw_step",
       [](const On& t) {
         Tensor p = t({3});
         ops::AdamWState s;
         ops::adamw_step(p, t({3}), s, 0, {});
       }},
      {"adamw_step",
       [](const On& t) {
         Tensor p = t({3});
         ops::AdamWState s;
         ops::adamw_step(p, t({4}), s, 1, {});
       }},
      {"cross_entropy_forward",
       [](const On& t) {
         Tensor logits({2, 3});
         logits.data()[4] = std::numeric_limits<float>::quiet_NaN();
         ops::cross_entropy_forward(logits.to(t.device), {0, 1});
       },
       false},
  };
}

}  // namespace

TEST_CASE("rules: each op's bad input raises the same message on the CPU and on the device") {
  emulated::register_cuda();
  ops::DeviceOps* device = ops::device_ops(Device::cuda);
  REQUIRE(device != nullptr);
  int compared = 0;
  for (const Case& c : cases()) {
    CAPTURE(c.op);
    const Raised cpu = raised(c.call, Device::cpu);
    if (c.shape_error) ops::register_device_ops(Device::cuda, nullptr);  // a rule runs before any device code
    const Raised dev = raised(c.call, Device::cuda);
    ops::register_device_ops(Device::cuda, device);
    CAPTURE(cpu.message);
    CHECK(cpu.message.find(c.op) != std::string::npos);
    CHECK(cpu.shape_error == c.shape_error);
    CHECK(dev.shape_error == c.shape_error);
    CHECK(dev.message == cpu.message);
    ++compared;
  }
  CHECK(compared == 35);
}
