#!/usr/bin/python3
"""Writes the PyTorch golden files that the C++ golden tests (tests/golden/) compare against.

Run with Debian's interpreter, which has torch 1.13 and numpy:

    /usr/bin/python3 tools/make_goldens.py            # writes tests/golden/data/
    /usr/bin/python3 tools/make_goldens.py --out DIR  # somewhere else

Layout: tests/golden/data/<case>/<tensor>.npy plus tests/golden/data/MANIFEST.json, which lists
for every case its description, its scalar parameters (eps, heads, ...) and, for every tensor,
its file, shape, dtype and what it is. The C++ tests read the scalar parameters from the manifest,
so this script is the single source of every size and hyper-parameter.

Precision policy: every input is drawn in float32 and stored as '<f4', so the C++ side sees the
exact values the oracle used; scalar hyper-parameters (eps, lr, betas, label smoothing) are
rounded to float32 too (f32()), because the C++ ops take them as float. The oracle then runs in float64 (torch autograd, torch.optim.AdamW)
on those float32-representable values, and every output and gradient is stored as '<f4' rounded
from the float64 result. A comparison against a golden therefore measures the C++ float32 error
alone (plus at most half an ulp of rounding in the golden itself).

Every case seeds its own torch.Generator, so adding a case never changes the others, and two runs
write identical bytes. The semantics follow the contracts in engine/ops/*.h and reference/gpt.h.
"""

import argparse
import json
import math
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F

MANIFEST = {}


# ----------------------------------------------------------------------------------------------
# Helpers

def f32(v):
    """v rounded to the nearest float32, as a Python float: scalar hyper-parameters (eps, lr, betas,
    label smoothing) reach the C++ ops as float, so the oracle uses the same float32 values."""
    return float(np.float32(v))


def randn(gen, *shape, scale=1.0, shift=0.0):
    """N(shift, scale²) drawn in float32, returned as float64 (exactly float32-representable)."""
    x = torch.randn(*shape, generator=gen, dtype=torch.float32) * scale + shift
    return x.to(torch.float32).to(torch.float64)


class Case:
    """One golden case: a directory of .npy files plus its manifest entry."""

    def __init__(self, out, name, description, params=None):
        self.dir = os.path.join(out, name)
        os.makedirs(self.dir, exist_ok=True)
        self.entry = {"description": description, "params": params or {}, "tensors": {}}
        MANIFEST[name] = self.entry

    def _path(self, name):
        path = os.path.join(self.dir, name + ".npy")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def f32(self, name, t, what):
        """Stores t (a tensor, or a Python float for a 0-d array) as '<f4', rounded to nearest."""
        a = np.asarray(t.detach().cpu().numpy() if torch.is_tensor(t) else t, dtype=np.float64)
        assert np.all(np.isfinite(a) | np.isneginf(a)), f"{name}: NaN or +inf in a golden"
        a = np.ascontiguousarray(a.astype("<f4"))
        np.save(self._path(name), a)
        self.entry["tensors"][name] = {"shape": list(a.shape), "dtype": "<f4", "what": what}

    def i64(self, name, t, what):
        """Stores integer ids as '<i8'."""
        a = np.ascontiguousarray(np.asarray(t.cpu().numpy() if torch.is_tensor(t) else t, dtype="<i8"))
        np.save(self._path(name), a)
        self.entry["tensors"][name] = {"shape": list(a.shape), "dtype": "<i8", "what": what}


def grads_of(output, upstream, inputs):
    """d(Σ output·upstream)/d(inputs) in float64 via autograd."""
    return torch.autograd.grad(output, inputs, grad_outputs=upstream)


def leaf(x):
    return x.clone().requires_grad_(True)


# ----------------------------------------------------------------------------------------------
# Op cases (engine/ops/*.h)

def case_matmul(out):
    g = torch.Generator().manual_seed(101)
    c = Case(out, "matmul", "Y = X·Wᵀ (matmul_forward) and dX = dY·W, dW = dYᵀ·X (matmul_backward)")
    x, w = leaf(randn(g, 5, 7, 11)), leaf(randn(g, 13, 11))
    y = F.linear(x, w)
    dy = randn(g, 5, 7, 13)
    dx, dw = grads_of(y, dy, (x, w))
    c.f32("x", x, "input X [5, 7, 11] (leading dims flatten to 35 rows)")
    c.f32("w", w, "weight W [13, 11]")
    c.f32("y", y, "Y = X·Wᵀ [5, 7, 13]")
    c.f32("dy", dy, "upstream gradient dY [5, 7, 13]")
    c.f32("dx", dx, "dX = dY·W [5, 7, 11]")
    c.f32("dw", dw, "dW = dYᵀ·X [13, 11] (sum over 35 rows)")


def case_bias_add(out):
    g = torch.Generator().manual_seed(102)
    c = Case(out, "bias_add", "y += b (bias_add_forward), db = Σ dy over leading dims (bias_add_backward)")
    y, b = randn(g, 5, 7, 13), leaf(randn(g, 13))
    out_ = y + b
    dy = randn(g, 5, 7, 13)
    (db,) = grads_of(out_, dy, (b,))
    c.f32("y", y, "input y [5, 7, 13]")
    c.f32("b", b, "bias b [13]")
    c.f32("out", out_, "y + b [5, 7, 13]")
    c.f32("dy", dy, "upstream gradient [5, 7, 13]")
    c.f32("db", db, "db [13] = Σ over 35 rows of dy")


def case_gelu(out):
    g = torch.Generator().manual_seed(103)
    c = Case(out, "gelu", "GELU tanh approximation, torch gelu(approximate='tanh'), forward and backward")
    x = leaf(randn(g, 7, 9, 5, scale=3.0))
    y = F.gelu(x, approximate="tanh")
    dy = randn(g, 7, 9, 5)
    (dx,) = grads_of(y, dy, (x,))
    c.f32("x", x, "input [7, 9, 5], N(0, 3²) so both tails are covered")
    c.f32("y", y, "gelu_tanh(x)")
    c.f32("dy", dy, "upstream gradient")
    c.f32("dx", dx, "dy · gelu_tanh'(x)")


def case_layernorm(out, name, seed, shift, what):
    g = torch.Generator().manual_seed(seed)
    eps = f32(1e-5)
    c = Case(out, name, what, {"eps": eps})
    x = leaf(randn(g, 5, 3, 17, scale=2.0, shift=shift))
    gamma, beta = leaf(randn(g, 17, scale=0.3, shift=1.0)), leaf(randn(g, 17, scale=0.2))
    y = F.layer_norm(x, (17,), gamma, beta, eps)
    dy = randn(g, 5, 3, 17)
    dx, dgamma, dbeta = grads_of(y, dy, (x, gamma, beta))
    xd = x.detach().reshape(-1, 17)
    mean = xd.mean(-1)
    rstd = 1.0 / torch.sqrt(xd.var(-1, unbiased=False) + eps)
    c.f32("x", x, f"input [5, 3, 17] = N({shift}, 2²)")
    c.f32("gamma", gamma, "weight [17] = N(1, 0.3²)")
    c.f32("beta", beta, "bias [17] = N(0, 0.2²)")
    c.f32("y", y, "layer_norm(x) [5, 3, 17]")
    c.f32("mean", mean, "per-row mean [15]")
    c.f32("rstd", rstd, "per-row 1/sqrt(biased var + eps) [15]")
    c.f32("dy", dy, "upstream gradient [5, 3, 17]")
    c.f32("dx", dx, "dx [5, 3, 17]")
    c.f32("dgamma", dgamma, "dgamma [17] (sum over 15 rows)")
    c.f32("dbeta", dbeta, "dbeta [17] (sum over 15 rows)")


def case_softmax(out):
    g = torch.Generator().manual_seed(105)
    c = Case(out, "softmax", "softmax over the last dim with an all −inf row (→ zeros), a partly −inf row and "
             "a row shifted by +1000 (needs the max subtracted)")
    x = randn(g, 3, 5, 19, scale=2.0)
    x[0, 0, :] = -math.inf
    x[0, 1, :5] = -math.inf
    x[1, 2, :] += 1000.0
    x = x.to(torch.float32).to(torch.float64)
    # torch gives NaN for an all −inf row where the header promises zeros: compute the rows that
    # have a finite entry with torch and multiply the others by 0 (so autograd gives dx = 0 there).
    alive = torch.isfinite(x).any(-1, keepdim=True)
    xs = leaf(torch.where(alive, x, torch.zeros_like(x)))
    y = F.softmax(xs, dim=-1) * alive
    dy = randn(g, 3, 5, 19)
    (dx,) = grads_of(y, dy, (xs,))
    c.f32("x", x, "input [3, 5, 19]: row [0,0] all −inf, row [0,1] has 5 −inf, row [1,2] is shifted by +1000")
    c.f32("y", y, "softmax(x) (zeros on the all −inf row)")
    c.f32("dy", dy, "upstream gradient")
    c.f32("dx", dx, "dx = y ⊙ (dy − Σ dy·y)")


def attention_oracle(qkv, heads, mask):
    """Causal MHA on [s, b, heads·3d] with per-head [q|k|v] blocks; mask [b, s] (1 real, 0 pad) or None.
    Returns out [s, b, heads·d] and probs [b, heads, s, s]; a query with no visible key gives zeros."""
    s, b, w = qkv.shape
    d = w // (3 * heads)
    blocks = qkv.reshape(s, b, heads, 3, d).permute(3, 1, 2, 0, 4)  # [3, b, heads, s, d]
    q, k, v = blocks[0], blocks[1], blocks[2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # [b, heads, s, s]
    visible = torch.tril(torch.ones(s, s, dtype=torch.bool))[None, None]
    if mask is not None:
        visible = visible & (mask[:, None, None, :] > 0)
    visible = visible.expand(b, heads, s, s)
    any_visible = visible.any(-1, keepdim=True)
    probs = F.softmax(scores.masked_fill(~visible, -1e300), dim=-1) * any_visible
    o = probs @ v  # [b, heads, s, d]
    return o.permute(2, 0, 1, 3).reshape(s, b, heads * d), probs


def case_attention(out, name, seed, s, b, heads, d, mask_rows, what):
    g = torch.Generator().manual_seed(seed)
    c = Case(out, name, what, {"heads": heads})
    qkv = leaf(randn(g, s, b, heads * 3 * d, scale=1.5))
    mask = None if mask_rows is None else torch.tensor(mask_rows, dtype=torch.float64)
    o, probs = attention_oracle(qkv, heads, mask)
    dout = randn(g, s, b, heads * d)
    (dqkv,) = grads_of(o, dout, (qkv,))
    c.f32("qkv", qkv, f"input [s={s}, b={b}, heads·3·d={heads * 3 * d}], per-head [q|k|v] blocks, d={d}")
    if mask is not None:
        c.f32("key_padding_mask", mask, f"[b={b}, s={s}], 1 = real key, 0 = padded key")
    c.f32("out", o, f"attention output [s, b, heads·d={heads * d}], head-major columns")
    c.f32("probs", probs, "softmax probabilities [b, heads, s, s] (0 where masked; all 0 for a query "
          "with no visible key)")
    c.f32("dout", dout, "upstream gradient [s, b, heads·d]")
    c.f32("dqkv", dqkv, "gradient wrt qkv [s, b, heads·3·d]")


def case_embedding(out):
    g = torch.Generator().manual_seed(107)
    V, h, b, s, start, v_local = 11, 7, 3, 5, 4, 4
    c = Case(out, "embedding", "token embedding (batch-first ids → sequence-first [s, b, h]) whole and as a "
             "vocab-parallel slice, and its scatter-add backward", {"vocab_start": start, "vocab_local": v_local})
    ids = torch.randint(0, V, (b, s), generator=g)
    ids[0, 1] = ids[2, 3] = ids[1, 4] = 5  # repeated id: its gradient row is a sum of 3 rows
    wte = leaf(randn(g, V, h))
    o = F.embedding(ids, wte).transpose(0, 1)  # [s, b, h]
    dout = randn(g, s, b, h)
    (dwte,) = grads_of(o, dout, (wte,))
    wl = leaf(wte.detach()[start:start + v_local].clone())
    inside = ((ids >= start) & (ids < start + v_local)).to(torch.float64)
    ol = (F.embedding((ids - start).clamp(0, v_local - 1), wl) * inside[..., None]).transpose(0, 1)
    (dwl,) = grads_of(ol, dout, (wl,))
    c.i64("ids", ids, f"token ids [b={b}, s={s}] in [0, {V}); id 5 occurs at least 3 times")
    c.f32("wte", wte, f"word embedding [V={V}, h={h}]")
    c.f32("out", o, "wte[ids] as [s, b, h]")
    c.f32("dout", dout, "upstream gradient [s, b, h]")
    c.f32("dwte", dwte, "dwte [V, h]: scatter-add of dout rows")
    c.f32("wte_local", wl, f"rows [{start}, {start + v_local}) of wte: one vocab-parallel shard")
    c.f32("out_local", ol, "lookup in the shard: ids outside it give zero rows [s, b, h]")
    c.f32("dwte_local", dwl, f"dwte of the shard [{v_local}, h]")


def case_position_embedding(out):
    g = torch.Generator().manual_seed(108)
    s, b, h, max_seq, start = 5, 3, 7, 9, 3
    c = Case(out, "position_embedding", "x += wpe[seq_start + si] (position_embedding_add) and dwpe "
             "(position_embedding_backward), at seq_start 0 and 3", {"max_seq": max_seq, "seq_start": start})
    x = randn(g, s, b, h)
    wpe = leaf(randn(g, max_seq, h))
    dx = randn(g, s, b, h)
    for tag, st in (("0", 0), (str(start), start)):
        o = x + wpe[st:st + s][:, None, :]
        (dwpe,) = grads_of(o, dx, (wpe,))
        c.f32(f"out_start{tag}", o, f"x + wpe[{st}..{st + s}) [s, b, h]")
        c.f32(f"dwpe_start{tag}", dwpe, f"dwpe [{max_seq}, h]: rows {st}..{st + s - 1} = Σ_b dx, others 0")
    c.f32("x", x, f"input x [s={s}, b={b}, h={h}]")
    c.f32("wpe", wpe, f"position table [max_seq={max_seq}, h]")
    c.f32("dx", dx, "upstream gradient [s, b, h]")


def case_cross_entropy(out, name, seed, smoothing, dloss):
    g = torch.Generator().manual_seed(seed)
    n, V = 11, 13
    smoothing, dloss = f32(smoothing), f32(dloss)
    c = Case(out, name, f"cross entropy, mean over non-ignored rows, label smoothing {smoothing:.3g}, "
             f"two rows ignored (−100), row 0 shifted by +100; dlogits for dloss = {dloss}",
             {"label_smoothing": smoothing, "dloss": dloss})
    logits = randn(g, n, V, scale=2.0)
    logits[0] += 100.0
    logits = leaf(logits.to(torch.float32).to(torch.float64))
    targets = torch.randint(0, V, (n,), generator=g)
    targets[3] = targets[8] = -100
    losses = F.cross_entropy(logits, targets, ignore_index=-100, reduction="none", label_smoothing=smoothing)
    loss = F.cross_entropy(logits, targets, ignore_index=-100, reduction="mean", label_smoothing=smoothing)
    n_valid = int((targets != -100).sum())
    # The header's definition: per-row losses (0 when ignored), mean over the valid rows.
    assert float(losses[3]) == 0.0 and float(losses[8]) == 0.0
    assert abs(float(loss) - float(losses.sum()) / n_valid) < 1e-12
    (dlogits,) = grads_of(loss, torch.tensor(dloss, dtype=torch.float64), (logits,))
    c.f32("logits", logits, f"logits [n={n}, V={V}], N(0, 2²), row 0 + 100")
    c.i64("targets", targets, "targets [n]; rows 3 and 8 are −100")
    c.f32("losses", losses, "per-row loss [n], 0 on ignored rows")
    c.f32("loss", float(loss), "mean loss (0-d)")
    c.i64("n_valid", np.int64(n_valid), "number of non-ignored rows (0-d)")
    c.f32("dlogits", dlogits, "dloss · d(mean loss)/dlogits [n, V], 0 on ignored rows")


def case_adamw(out):
    g = torch.Generator().manual_seed(110)
    hp = {"lr": f32(1e-3), "beta1": f32(0.9), "beta2": f32(0.999), "eps": f32(1e-8), "weight_decay": f32(0.01),
          "steps": 3}
    c = Case(out, "adamw", "3 torch.optim.AdamW steps on one parameter from a given gradient sequence; "
             "element [0, 0] has a zero gradient at every step", hp)
    p = torch.nn.Parameter(randn(g, 7, 5))
    grads = torch.stack([randn(g, 7, 5, scale=0.1) for _ in range(3)])
    grads[:, 0, 0] = 0.0
    c.f32("param0", p, "parameter before step 1 [7, 5]")
    c.f32("grads", grads, "gradient at steps 1, 2, 3 [3, 7, 5]")
    opt = torch.optim.AdamW([p], lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"],
                            weight_decay=hp["weight_decay"])
    after, ms, vs = [], [], []
    for t in range(3):
        p.grad = grads[t].clone()
        opt.step()
        st = opt.state[p]
        after.append(p.detach().clone())
        ms.append(st["exp_avg"].clone())
        vs.append(st["exp_avg_sq"].clone())
    c.f32("params", torch.stack(after), "parameter after steps 1, 2, 3 [3, 7, 5]")
    c.f32("m", torch.stack(ms), "first moment after steps 1, 2, 3 [3, 7, 5]")
    c.f32("v", torch.stack(vs), "second moment after steps 1, 2, 3 [3, 7, 5]")


# ----------------------------------------------------------------------------------------------
# The reference GPT (reference/gpt.h)

def gpt_param_shapes(cfg):
    """Names and shapes in the order of reference/gpt.h (Megatron-LM names)."""
    V, S, h, f = cfg["vocab"], cfg["seq"], cfg["hidden"], cfg["ffn"]
    out = [("embedding.word_embeddings.weight", [V, h]), ("embedding.position_embeddings.weight", [S, h])]
    for i in range(cfg["layers"]):
        p = f"decoder.layers.{i}."
        out += [(p + "input_layernorm.weight", [h]), (p + "input_layernorm.bias", [h]),
                (p + "self_attention.linear_qkv.weight", [3 * h, h]), (p + "self_attention.linear_qkv.bias", [3 * h]),
                (p + "self_attention.linear_proj.weight", [h, h]), (p + "self_attention.linear_proj.bias", [h]),
                (p + "pre_mlp_layernorm.weight", [h]), (p + "pre_mlp_layernorm.bias", [h]),
                (p + "mlp.linear_fc1.weight", [f, h]), (p + "mlp.linear_fc1.bias", [f]),
                (p + "mlp.linear_fc2.weight", [h, f]), (p + "mlp.linear_fc2.bias", [h])]
    out += [("decoder.final_layernorm.weight", [h]), ("decoder.final_layernorm.bias", [h])]
    if not cfg["tied"]:
        out.append(("output_layer.weight", [V, h]))
    return out


def gpt_init(cfg, g):
    """Weights N(0, σ²) (σ/√(2L) for linear_proj and linear_fc2, as in the header); LayerNorm weights
    N(1, 0.1²), LayerNorm and linear biases N(0, 0.05²) so that their gradients are exercised."""
    sigma, L = cfg["init_std"], cfg["layers"]
    params = {}
    for name, shape in gpt_param_shapes(cfg):
        if "layernorm.weight" in name:
            t = randn(g, *shape, scale=0.1, shift=1.0)
        elif name.endswith(".bias"):
            t = randn(g, *shape, scale=0.05)
        elif "linear_proj" in name or "linear_fc2" in name:
            t = randn(g, *shape, scale=sigma / math.sqrt(2 * L))
        else:
            t = randn(g, *shape, scale=sigma)
        params[name] = torch.nn.Parameter(t)
    return params


def gpt_forward(cfg, P, ids, targets):
    """Loss and logits [b, s, V] of reference/gpt.h's architecture (dropout off)."""
    b, s = ids.shape
    h, heads, eps = cfg["hidden"], cfg["heads"], cfg["ln_eps"]
    wte = P["embedding.word_embeddings.weight"]
    x = (F.embedding(ids, wte) + P["embedding.position_embeddings.weight"][:s][None]).transpose(0, 1)  # [s, b, h]
    for i in range(cfg["layers"]):
        p = f"decoder.layers.{i}."
        a = F.layer_norm(x, (h,), P[p + "input_layernorm.weight"], P[p + "input_layernorm.bias"], eps)
        qkv = F.linear(a, P[p + "self_attention.linear_qkv.weight"], P[p + "self_attention.linear_qkv.bias"])
        o, _ = attention_oracle(qkv, heads, None)
        x = x + F.linear(o, P[p + "self_attention.linear_proj.weight"], P[p + "self_attention.linear_proj.bias"])
        m = F.layer_norm(x, (h,), P[p + "pre_mlp_layernorm.weight"], P[p + "pre_mlp_layernorm.bias"], eps)
        u = F.gelu(F.linear(m, P[p + "mlp.linear_fc1.weight"], P[p + "mlp.linear_fc1.bias"]), approximate="tanh")
        x = x + F.linear(u, P[p + "mlp.linear_fc2.weight"], P[p + "mlp.linear_fc2.bias"])
    y = F.layer_norm(x, (h,), P["decoder.final_layernorm.weight"], P["decoder.final_layernorm.bias"], eps)
    w_out = wte if cfg["tied"] else P["output_layer.weight"]
    logits = F.linear(y, w_out).transpose(0, 1)  # [b, s, V]
    loss = F.cross_entropy(logits.reshape(b * s, -1), targets.reshape(-1), ignore_index=-100,
                           label_smoothing=cfg["label_smoothing"])
    return loss, logits


def case_gpt(out, name, seed, tied, smoothing, ffn):
    g = torch.Generator().manual_seed(seed)
    cfg = {"vocab": 37, "seq": 16, "hidden": 24, "heads": 3, "layers": 2, "ffn": ffn, "tied": tied,
           "ln_eps": f32(1e-5), "label_smoothing": f32(smoothing), "init_std": f32(0.02), "dropout": 0.0,
           "b": 2, "s": 13, "steps": 3,
           "adamw": {"lr": f32(1e-3), "beta1": f32(0.9), "beta2": f32(0.999), "eps": f32(1e-8),
                     "weight_decay": f32(0.01)}}
    c = Case(out, name, f"2-layer pre-LN GPT of reference/gpt.h, {'tied' if tied else 'untied'}, label smoothing "
             f"{smoothing}, dropout off: loss, logits, every gradient, then 3 AdamW steps on the same batch "
             "(forward, backward, step)", cfg)
    P = gpt_init(cfg, g)
    b, s, V = cfg["b"], cfg["s"], cfg["vocab"]
    ids = torch.randint(0, V, (b, s), generator=g)
    targets = torch.randint(0, V, (b, s), generator=g)
    targets[0, 5] = targets[1, 12] = -100
    c.i64("ids", ids, f"token ids [b={b}, s={s}]")
    c.i64("targets", targets, "targets [b, s]; [0, 5] and [1, 12] are −100")
    for name_, t in P.items():
        c.f32("param/" + name_, t, "initial value")
    hp = cfg["adamw"]
    opt = torch.optim.AdamW(list(P.values()), lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"],
                            weight_decay=hp["weight_decay"])
    losses = []
    for step in range(cfg["steps"]):
        opt.zero_grad(set_to_none=True)
        loss, logits = gpt_forward(cfg, P, ids, targets)
        loss.backward()
        losses.append(float(loss))
        if step == 0:
            c.f32("logits", logits, f"logits of the first forward [b, s, V={V}]")
            for name_, t in P.items():
                c.f32("grad/" + name_, t.grad, "gradient of the first forward's mean loss")
        opt.step()
    with torch.no_grad():
        losses.append(float(gpt_forward(cfg, P, ids, targets)[0]))
    c.f32("losses", torch.tensor(losses), "loss of the forward of steps 1, 2, 3, then of a 4th forward after step 3 [4]")
    for name_, t in P.items():
        c.f32("param_after/" + name_, t, f"value after {cfg['steps']} AdamW steps")


# ----------------------------------------------------------------------------------------------
# .npy reader fixtures (engine/io/npy.h): files numpy itself wrote, including ones to reject

def case_npy(out):
    c = Case(out, "npy", "files written by numpy for the .npy reader tests (some must be rejected)")
    d = c.dir
    a = (np.arange(6, dtype="<f4").reshape(2, 3) * 0.5 - 1.0).astype("<f4")
    np.save(os.path.join(d, "f4_2x3.npy"), a)
    np.save(os.path.join(d, "f8_4.npy"), np.array([0.1, -2.5, 1e-40, 3.0e38], dtype="<f8"))
    np.save(os.path.join(d, "i8_2x2.npy"), np.array([[-100, 5], [2 ** 40, 0]], dtype="<i8"))
    np.save(os.path.join(d, "i4_4.npy"), np.array([-3, 0, 7, 2 ** 31 - 1], dtype="<i4"))
    np.save(os.path.join(d, "scalar_f4.npy"), np.float32(3.25))
    np.save(os.path.join(d, "empty_f4_0x4.npy"), np.zeros((0, 4), dtype="<f4"))
    with open(os.path.join(d, "v2_f4_3.npy"), "wb") as f:
        np.lib.format.write_array(f, np.array([1.5, -2.0, 4.0], dtype="<f4"), version=(2, 0))
    np.save(os.path.join(d, "fortran_f4_2x3.npy"), np.asfortranarray(a))
    np.save(os.path.join(d, "f2_3.npy"), np.array([1, 2, 3], dtype="<f2"))
    np.save(os.path.join(d, "be_f4_3.npy"), np.array([1, 2, 3], dtype=">f4"))
    raw = open(os.path.join(d, "f4_2x3.npy"), "rb").read()
    open(os.path.join(d, "truncated_f4_2x3.npy"), "wb").write(raw[:-4])
    c.entry["tensors"] = {
        "f4_2x3": {"shape": [2, 3], "dtype": "<f4", "what": "arange(6)·0.5 − 1"},
        "f8_4": {"shape": [4], "dtype": "<f8", "what": "0.1, −2.5, 1e-40 (f32 subnormal), 3e38"},
        "i8_2x2": {"shape": [2, 2], "dtype": "<i8", "what": "[[−100, 5], [2^40, 0]]"},
        "i4_4": {"shape": [4], "dtype": "<i4", "what": "−3, 0, 7, 2^31 − 1"},
        "scalar_f4": {"shape": [], "dtype": "<f4", "what": "0-d 3.25"},
        "empty_f4_0x4": {"shape": [0, 4], "dtype": "<f4", "what": "no elements"},
        "v2_f4_3": {"shape": [3], "dtype": "<f4", "what": "format version 2.0: 1.5, −2, 4"},
        "fortran_f4_2x3": {"shape": [2, 3], "dtype": "<f4", "what": "Fortran order (to reject)"},
        "f2_3": {"shape": [3], "dtype": "<f2", "what": "float16 (to reject)"},
        "be_f4_3": {"shape": [3], "dtype": ">f4", "what": "big-endian (to reject)"},
        "truncated_f4_2x3": {"shape": [2, 3], "dtype": "<f4", "what": "f4_2x3 with its last 4 bytes cut (to reject)"},
    }


def main():
    sys.modules.setdefault("make_goldens", sys.modules[__name__])  # one MANIFEST when run as a script
    import goldens_llama  # noqa: E402 (it imports this module's helpers)
    import goldens_moe  # noqa: E402

    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "golden", "data"))
    args = ap.parse_args()
    out = os.path.normpath(args.out)
    if os.path.isdir(out):
        shutil.rmtree(out)  # regenerate from scratch so no stale file survives
    os.makedirs(out)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)

    case_npy(out)
    case_matmul(out)
    case_bias_add(out)
    case_gelu(out)
    case_layernorm(out, "layernorm", 104, 0.0, "LayerNorm over the last dim (eps 1e-5), forward and backward")
    case_layernorm(out, "layernorm_offset", 114, 300.0, "LayerNorm on rows with mean ≈ 300 ≫ std 2: a one-pass "
                   "variance E[x²] − E[x]² in float32 would cancel catastrophically")
    goldens_llama.cases(out)  # the Llama block's ops: RMSNorm, SwiGLU, rotary embedding
    case_softmax(out)
    case_attention(out, "attention", 106, 7, 3, 3, 5,
                   [[1, 1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 1, 1], [1, 1, 1, 1, 1, 0, 0]],
                   "causal MHA with a key padding mask: batch 1 pads keys 0 and 4 (so its query 0 sees no key "
                   "and gives zeros), batch 2 pads keys 5 and 6")
    case_attention(out, "attention_nomask", 116, 6, 2, 2, 4, None, "causal MHA without a padding mask")
    case_embedding(out)
    case_position_embedding(out)
    case_cross_entropy(out, "cross_entropy", 109, 0.0, 1.0)
    case_cross_entropy(out, "cross_entropy_smooth", 119, 0.1, 0.75)
    case_adamw(out)
    case_gpt(out, "gpt_tied", 120, True, 0.0, 96)
    case_gpt(out, "gpt_untied_smooth", 121, False, 0.1, 40)  # ffn 40 ≠ 4h keeps the files small
    goldens_moe.cases(out)  # the MoE router and one MoE layer

    manifest = {
        "generator": "tools/make_goldens.py (run with /usr/bin/python3)",
        "torch": torch.__version__,
        "numpy": np.__version__,
        "precision": "inputs drawn in float32; oracle in float64; outputs stored as float32 rounded from float64",
        "cases": MANIFEST,
    }
    with open(os.path.join(out, "MANIFEST.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False, sort_keys=False)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(r, n)) for r, _, fs in os.walk(out) for n in fs)
    print(f"wrote {len(MANIFEST)} cases, {total / 1024:.0f} KiB under {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
