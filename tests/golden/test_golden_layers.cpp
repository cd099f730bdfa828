// Golden tests of the model-level ops against PyTorch (float64 oracle, tools/make_goldens.py):
// attention, token and position embedding, cross entropy, AdamW. Tolerances: docs/tolerances.md.
#include <doctest/doctest.h>

#include <string>

#include "engine/ops/adamw.h"
#include "engine/ops/attention.h"
#include "engine/ops/cross_entropy.h"
#include "engine/ops/embedding.h"
#include "tests/golden/golden_util.h"

using namespace tpsp;
using golden::case_params;
using golden::check_close;
using golden::load;
using golden::Tol;

TEST_CASE("golden: attention forward+backward") {
  // attention: key padding mask (a query with no visible key gives zeros); attention_nomask: none.
  for (const std::string c : {"attention", "attention_nomask"}) {
    CAPTURE(c);
    ops::AttentionOptions opt;
    opt.heads = case_params(c).at("heads").get<int64_t>();
    if (c == "attention") opt.key_padding_mask = load(c, "key_padding_mask");
    const Tensor qkv = load(c, "qkv");
    const ops::AttentionOut f = ops::attention_forward(qkv, opt);
    const Tol tol{1e-5, 1e-6};  // q·k over d ≤ 5, softmax over ≤ 7 keys, p·v over ≤ 7 keys
    check_close(c + "/out", f.out, load(c, "out"), tol);
    check_close(c + "/probs", f.probs, load(c, "probs"), tol);
    const Tensor dqkv = ops::attention_backward(load(c, "dout"), qkv, f.probs, opt);
    check_close(c + "/dqkv", dqkv, load(c, "dqkv"), tol);
  }
}

TEST_CASE("golden: embedding forward+backward") {
  const std::string c = "embedding";
  const TokenBatch ids = golden::load_tokens(c, "ids");
  const Tensor wte = load(c, "wte"), dout = load(c, "dout");
  const int64_t start = case_params(c).at("vocab_start").get<int64_t>();
  const int64_t v_local = case_params(c).at("vocab_local").get<int64_t>();
  const Tol copy{0, 0};       // a lookup copies values: exact
  const Tol sum{1e-6, 1e-7};  // a row gets the sum of at most 3 dout rows
  check_close(c + "/out", ops::embedding_forward(ids, wte), load(c, "out"), copy);
  check_close(c + "/dwte", ops::embedding_backward(dout, ids, wte.size(0)), load(c, "dwte"), sum);
  const Tensor wl = load(c, "wte_local");
  check_close(c + "/out_local", ops::embedding_forward(ids, wl, start), load(c, "out_local"), copy);
  check_close(c + "/dwte_local", ops::embedding_backward(dout, ids, v_local, start), load(c, "dwte_local"),
              sum);
}

TEST_CASE("golden: position embedding forward+backward") {
  const std::string c = "position_embedding";
  const int64_t max_seq = case_params(c).at("max_seq").get<int64_t>();
  const int64_t start = case_params(c).at("seq_start").get<int64_t>();
  const Tensor wpe = load(c, "wpe"), dx = load(c, "dx");
  for (const int64_t st : {int64_t(0), start}) {
    const std::string tag = "_start" + std::to_string(st);
    Tensor x = load(c, "x").clone();
    ops::position_embedding_add(x, wpe, st);
    check_close(c + "/out" + tag, x, load(c, "out" + tag), Tol{1.2e-7, 0});  // one correctly rounded add
    check_close(c + "/dwpe" + tag, ops::position_embedding_backward(dx, max_seq, st), load(c, "dwpe" + tag),
                Tol{1e-6, 1e-7});  // sum of b = 3 terms
  }
}

TEST_CASE("golden: cross entropy forward+backward") {
  // cross_entropy: α = 0, dloss = 1; cross_entropy_smooth: α = 0.1, dloss = 0.75. Both ignore 2 rows.
  for (const std::string c : {"cross_entropy", "cross_entropy_smooth"}) {
    CAPTURE(c);
    const float alpha = case_params(c).at("label_smoothing").get<float>();
    const float dloss = case_params(c).at("dloss").get<float>();
    const Tensor logits = load(c, "logits");
    const std::vector<int64_t> targets = golden::load_ints(c, "targets");
    const ops::CrossEntropyOut f = ops::cross_entropy_forward(logits, targets, alpha);
    const Tol tol{5e-6, 1e-7};  // log-sum-exp of 13 terms
    check_close(c + "/losses", f.losses, load(c, "losses"), tol);
    check_close(c + "/loss", f.loss, load(c, "loss").data()[0], tol);
    CHECK(f.n_valid == golden::load_ints(c, "n_valid").at(0));
    check_close(c + "/dlogits", ops::cross_entropy_backward(logits, targets, dloss, alpha),
                load(c, "dlogits"), Tol{5e-6, 1e-8});  // |dlogits| ≤ 1/n_valid
  }
}

TEST_CASE("golden: adamw 3 steps") {
  const std::string c = "adamw";
  const auto& hp = case_params(c);
  ops::AdamWConfig cfg;
  cfg.lr = hp.at("lr").get<float>();
  cfg.beta1 = hp.at("beta1").get<float>();
  cfg.beta2 = hp.at("beta2").get<float>();
  cfg.eps = hp.at("eps").get<float>();
  cfg.weight_decay = hp.at("weight_decay").get<float>();
  const int64_t steps = hp.at("steps").get<int64_t>();
  Tensor p = load(c, "param0").clone();
  const Tensor grads = load(c, "grads"), params = load(c, "params"), m = load(c, "m"), v = load(c, "v");
  ops::AdamWState state;
  for (int64_t t = 1; t <= steps; ++t) {
    const std::string at = "[step " + std::to_string(t) + "]";
    ops::adamw_step(p, grads.slice0(t - 1, t).reshape(p.shape()), state, t, cfg);
    check_close(c + "/param " + at, p, params.slice0(t - 1, t).reshape(p.shape()), Tol{1e-6, 1e-8});
    check_close(c + "/m " + at, state.m, m.slice0(t - 1, t).reshape(p.shape()), Tol{1e-6, 0, 2e-7});
    check_close(c + "/v " + at, state.v, v.slice0(t - 1, t).reshape(p.shape()), Tol{1e-6, 0, 2e-7});
  }
}
