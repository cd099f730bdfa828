"""The golden cases of the MoE layer (tools/make_goldens.py writes them with the others): the top-k router
with its load-balancing loss, and one MoE layer forward and backward, each from a float64 oracle written
independently of the engine: torch.topk and a softmax over the gathered logits, the Switch loss from
torch's bincount and autograd for every gradient; the layer loops over tokens (each token through its k
experts), where the engine's reference groups the tokens by expert."""

import torch
import torch.nn.functional as F

from make_goldens import Case, f32, grads_of, leaf, randn


def router_oracle(logits, k, coeff):
    """(probs [T, k], indices [T, k], scores [T, E], tokens_per_expert [E], aux) of Megatron's TopKRouter
    defaults: top-k of the logits, softmax over the chosen ones; the Switch loss on softmax(logits)."""
    T, E = logits.shape
    top, idx = torch.topk(logits, k, dim=-1)  # float64, no ties in these inputs (asserted)
    probs = torch.softmax(top, dim=-1)
    scores = torch.softmax(logits, dim=-1)
    tpe = torch.bincount(idx.reshape(-1), minlength=E).to(torch.float64)
    aux = (scores.sum(0) * tpe).sum() * (E * coeff / (k * T * T))
    return probs, idx, scores, tpe, aux


def assert_no_ties(logits):
    s = torch.sort(logits, dim=-1).values
    assert bool((s[:, 1:] - s[:, :-1]).abs().min() > 1e-6), "tied logits in a golden (torch.topk's order)"


def case_router(out):
    """Logits [9, 5] N(0, 1.5²), k = 2, moe_aux_loss_coeff 0.25 (large, so the loss's share of dlogits is
    well above float32 rounding); loss = Σ probs·dprobs + aux."""
    g = torch.Generator().manual_seed(131)
    k, coeff = 2, f32(0.25)
    c = Case(out, "moe_router", "top-2 of 5 experts for 9 tokens (softmax over the chosen logits), the Switch "
             "load-balancing loss (coeff 0.25) and dlogits of Σ probs·dprobs + aux", {"topk": k, "coeff": coeff})
    logits = leaf(randn(g, 9, 5, scale=1.5))
    assert_no_ties(logits.detach())
    dprobs = randn(g, 9, k)
    probs, idx, scores, tpe, aux = router_oracle(logits, k, coeff)
    (dlogits,) = torch.autograd.grad((probs * dprobs).sum() + aux, (logits,))
    c.f32("logits", logits, "router logits [T=9, E=5] = N(0, 1.5²)")
    c.f32("dprobs", dprobs, "upstream gradient of probs [9, 2]")
    c.f32("probs", probs, "softmax over each token's 2 chosen logits [9, 2], best first")
    c.i64("indices", idx, "each token's experts [9, 2], best first")
    c.f32("scores", scores, "softmax over all 5 logits [9, 5]")
    c.i64("tokens_per_expert", tpe.to(torch.int64), "choices per expert [5]")
    c.f32("aux", aux, "E·coeff/(k·T²)·Σ_e (Σ_t scores)·tokens_per_expert")
    c.f32("dlogits", dlogits, "dlogits [9, 5]")


def expert_oracle(x, wg, wu, w2):
    return (F.silu(x @ wg.T) * (x @ wu.T)) @ w2.T


def case_moe_layer(out):
    """x [3, 2, 8] N(0, 1) with +3 on feature 0; 4 experts, top-2, ffn 5, coeff 0.1. The router's weight is
    N(0, 0.5²) but for feature 0: +2 for expert 0, +0.5 for expert 1, −5 for expert 3, so the 12 choices split
    5, 4, 3, 0 (uneven counts, an idle expert). Expert matrices N(0, 0.3²); dy N(0, 1); loss Σ y·dy + aux."""
    g = torch.Generator().manual_seed(132)
    s, b, h, E, k, f, coeff = 3, 2, 8, 4, 2, 5, f32(0.1)
    c = Case(out, "moe_layer", "one MoE layer (4 SwiGLU experts, top-2, h 8, ffn 5, coeff 0.1) on 6 tokens routed "
             "unevenly (the 12 choices split 5, 4, 3, 0: expert 3 idle), forward and backward of every "
             "parameter; names as reference/moe_layer.h, stored as w.<name>, gradients as g.<name>",
             {"num_experts": E, "topk": k, "ffn": f, "coeff": coeff})
    x0 = randn(g, s, b, h)
    x0[..., 0] += 3.0
    x = leaf(x0)
    wr = randn(g, E, h, scale=0.5)
    wr[0, 0], wr[1, 0], wr[3, 0] = 2.0, 0.5, -5.0
    P = {"mlp.router.weight": leaf(wr)}
    for e in range(E):
        for part, shape in (("linear_gate", (f, h)), ("linear_up", (f, h)), ("linear_fc2", (h, f))):
            P[f"mlp.experts.local_experts.{e}.{part}.weight"] = leaf(randn(g, *shape, scale=0.3))
    tokens = x.reshape(s * b, h)
    logits = tokens @ P["mlp.router.weight"].T
    assert_no_ties(logits.detach())
    probs, idx, _, tpe, aux = router_oracle(logits, k, coeff)
    assert tpe.tolist() == [5, 4, 3, 0], f"routing not skewed as described: {tpe.tolist()}"
    rows = []
    for t in range(s * b):  # each token through its k experts, weighted by its probs
        y_t = torch.zeros(h, dtype=torch.float64)
        for j in range(k):
            e = int(idx[t, j])
            ex = [P[f"mlp.experts.local_experts.{e}.{part}.weight"] for part in ("linear_gate", "linear_up", "linear_fc2")]
            y_t = y_t + probs[t, j] * expert_oracle(tokens[t:t + 1], *ex)[0]
        rows.append(y_t)
    y = torch.stack(rows).reshape(s, b, h)
    dy = randn(g, s, b, h)
    grads = torch.autograd.grad((y * dy).sum() + aux, (x, *P.values()), allow_unused=True)
    grads = [torch.zeros_like(w) if gw is None else gw for w, gw in zip((x, *P.values()), grads)]  # idle expert: 0
    c.f32("x", x, f"input [s={s}, b={b}, h={h}]")
    c.f32("y", y, "layer output [s, b, h]")
    c.f32("aux", aux, "the load-balancing loss")
    c.i64("tokens_per_expert", tpe.to(torch.int64), "choices per expert [4]")
    c.f32("dy", dy, "upstream gradient [s, b, h]")
    c.f32("dx", grads[0], "dx [s, b, h]")
    for (n, w), gw in zip(P.items(), grads[1:]):
        c.f32("w." + n, w, f"parameter {n} {list(w.shape)}")
        c.f32("g." + n, gw, f"gradient of {n}")


def cases(out):
    case_router(out)
    case_moe_layer(out)
