"""The golden cases of the Llama block's ops (tools/make_goldens.py writes them with the others): RMSNorm,
SwiGLU, rotary position embedding and grouped-query attention, each from a float64 oracle written
independently of the engine (torch 1.13 has neither F.rms_norm nor a rotary helper nor
scaled_dot_product_attention: RMSNorm is its own formula, SwiGLU is F.silu of the gate times up, the
rotation goes through complex numbers, not rotate_half, and GQA gives each query head its group's key and
value through repeat_interleave)."""

import math

import torch
import torch.nn.functional as F

from make_goldens import Case, f32, grads_of, leaf, randn


def rmsnorm_oracle(x, w, eps):
    """x·w / √(mean(x², −1) + eps) in float64 (torch 1.13 has no F.rms_norm); autograd gives the gradients."""
    return x * w / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def case_rmsnorm(out, name, seed, eps, x, x_what, what):
    """RMSNorm over the last dim of the input x(g), drawn first from the case's generator g; then
    weight N(1, 0.3²) and dy N(0, 1). rstd is stored per row [n], as rmsnorm_forward returns it."""
    g = torch.Generator().manual_seed(seed)
    eps = f32(eps)
    c = Case(out, name, what, {"eps": eps})
    x = leaf(x(g))
    shape, h = list(x.shape), x.shape[-1]
    n = x.numel() // h
    w = leaf(randn(g, h, scale=0.3, shift=1.0))
    y = rmsnorm_oracle(x, w, eps)
    dy = randn(g, *shape)
    dx, dw = grads_of(y, dy, (x, w))
    rstd = 1.0 / torch.sqrt((x.detach().reshape(n, h) ** 2).mean(-1) + eps)
    c.f32("x", x, f"input {shape}: {x_what}")
    c.f32("weight", w, f"weight [{h}] = N(1, 0.3²)")
    c.f32("y", y, f"x·rstd·weight {shape}")
    c.f32("rstd", rstd, f"per-row 1/sqrt(mean(x²) + eps) [{n}]")
    c.f32("dy", dy, f"upstream gradient {shape}")
    c.f32("dx", dx, f"dx {shape}")
    c.f32("dweight", dw, f"dweight [{h}] = Σ over {n} rows of dy·x·rstd")


def rmsnorm_large_x(g):
    """[4, 3, 37]: row r is N((−1)^r·300, 2²), so mean(x²) ≈ 9e4 is the squared offset; row 5 is
    3e19·N(0, 1), whose squares (≈ 9e38 > FLT_MAX 3.4e38) overflow float32 but not double."""
    x = randn(g, 4, 3, 37, scale=2.0).reshape(12, 37)
    x += 300.0 * (1.0 - 2.0 * (torch.arange(12, dtype=torch.float64) % 2))[:, None]
    x[5] = randn(g, 37, scale=3e19)
    return x.reshape(4, 3, 37).to(torch.float32).to(torch.float64)


def case_swiglu(out):
    """SwiGLU on [gate | up]: y = silu(gate)·up, with gates across silu's range (σ saturating at ±20)."""
    g = torch.Generator().manual_seed(124)
    c = Case(out, "swiglu", "SwiGLU on x [5, 3, 2·13] = [gate | up]: y = silu(gate)·up, forward and backward; "
             "the gates span N(0, 3²) with two set to ±20 (σ saturating)")
    x = randn(g, 5, 3, 26, scale=3.0)
    x[0, 0, 0], x[0, 0, 1] = 20.0, -20.0
    x = leaf(x.to(torch.float32).to(torch.float64))
    gate, up = x[..., :13], x[..., 13:]
    y = F.silu(gate) * up
    dy = randn(g, 5, 3, 13)
    (dx,) = grads_of(y, dy, (x,))
    c.f32("x", x, "input [5, 3, 26] = [gate | up]")
    c.f32("y", y, "silu(gate)·up [5, 3, 13]")
    c.f32("dy", dy, "upstream gradient [5, 3, 13]")
    c.f32("dx", dx, "dx [5, 3, 26] = [dy·up·silu'(gate) | dy·silu(gate)]")


def rope_oracle(x, positions, d, base):
    """x [s, b, n·d] rotated by complex multiplication: the pair (x_i, x_{i+d/2}) is the complex number
    x_i + i·x_{i+d/2}, multiplied by e^{i·p·θ_i}, θ_i = base^(−2i/d)."""
    s, b, width = x.shape
    half = d // 2
    xh = x.reshape(s, b, width // d, 2, half)
    z = torch.complex(xh[:, :, :, 0, :], xh[:, :, :, 1, :])
    theta = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    angle = torch.tensor(positions, dtype=torch.float64)[:, None] * theta[None, :]
    rot = torch.polar(torch.ones_like(angle), angle)[:, None, None, :]
    w = z * rot
    return torch.stack([w.real, w.imag], dim=3).reshape(s, b, width)


def case_rope(out, name, seed, s, b, heads, d, positions, base, what):
    g = torch.Generator().manual_seed(seed)
    base = f32(base)
    c = Case(out, name, what, {"d": d, "base": base, "positions": positions})
    x = leaf(randn(g, s, b, heads * d, scale=2.0))
    y = rope_oracle(x, positions, d, base)
    dy = randn(g, s, b, heads * d)
    (dx,) = grads_of(y, dy, (x,))
    c.f32("x", x, f"input [{s}, {b}, {heads}·{d}]")
    c.f32("y", y, "x rotated: (x_i + i·x_{i+d/2})·e^{i·p·θ_i}")
    c.f32("dy", dy, "upstream gradient")
    c.f32("dx", dx, "dx: dy rotated by the opposite angles")


def gqa_oracle(qkv, heads, groups, mask):
    """Causal GQA on Megatron's per-group layout [s, b, groups·(heads/groups + 2)·d]: each group holds its
    heads/groups queries, then its key, then its value. Keys and values reach their query heads through
    repeat_interleave (head h uses group h // (heads/groups)); mask [b, s] (1 real, 0 pad) or None.
    Returns out [s, b, heads·d] and probs [b, heads, s, s]."""
    s, b, w = qkv.shape
    per = heads // groups
    d = w // (groups * (per + 2))
    x = qkv.reshape(s, b, groups, per + 2, d)
    q = x[:, :, :, :per, :].reshape(s, b, heads, d)
    k = x[:, :, :, per, :].repeat_interleave(per, dim=2)
    v = x[:, :, :, per + 1, :].repeat_interleave(per, dim=2)
    q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))  # [b, heads, s, d]
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    visible = torch.ones(s, s, dtype=torch.bool).tril().expand(b, heads, s, s)
    if mask is not None:
        visible = visible & (mask[:, None, None, :] > 0)
    probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    probs = torch.nan_to_num(probs, nan=0.0)  # a query with no visible key: zeros
    o = torch.matmul(probs, v)
    return o.permute(2, 0, 1, 3).reshape(s, b, heads * d), probs


def case_gqa(out, name, seed, s, b, heads, groups, d, mask_rows, what):
    g = torch.Generator().manual_seed(seed)
    c = Case(out, name, what, {"heads": heads, "query_groups": groups})
    width = groups * (heads // groups + 2) * d
    qkv = leaf(randn(g, s, b, width, scale=1.5))
    mask = None if mask_rows is None else torch.tensor(mask_rows, dtype=torch.float64)
    o, probs = gqa_oracle(qkv, heads, groups, mask)
    dout = randn(g, s, b, heads * d)
    (dqkv,) = grads_of(o, dout, (qkv,))
    c.f32("qkv", qkv, f"input [s={s}, b={b}, groups·(heads/groups+2)·d={width}], per-group [q… | k | v], d={d}")
    if mask is not None:
        c.f32("key_padding_mask", mask, f"[b={b}, s={s}], 1 = real key, 0 = padded key")
    c.f32("out", o, f"attention output [s, b, heads·d={heads * d}], head-major columns")
    c.f32("probs", probs, "softmax probabilities [b, heads, s, s]")
    c.f32("dout", dout, "upstream gradient [s, b, heads·d]")
    c.f32("dqkv", dqkv, "gradient wrt qkv: a group's k and v gradients summed over its query heads")


def llama_layer_oracle(x, P, heads, groups, eps, base, positions, qk_layernorm, cu_seqlens):
    """One Llama layer in float64, as Llama's reference code writes it (no fused matrices): RMSNorm, q/k/v
    projections, optional per-head RMSNorm of q and k, RoPE through complex numbers, keys and values
    repeat_interleave'd to their query heads, causal attention inside each packed sequence, then the
    residual, RMSNorm and F.silu(gate)·up into fc2."""
    s, b, h = x.shape
    d, per = h // heads, heads // groups
    a = rmsnorm_oracle(x, P["input_layernorm.weight"], eps)
    q = F.linear(a, P["self_attention.linear_q.weight"])
    k = F.linear(a, P["self_attention.linear_k.weight"])
    v = F.linear(a, P["self_attention.linear_v.weight"])
    if qk_layernorm:
        q = rmsnorm_oracle(q.reshape(s, b, heads, d), P["self_attention.q_layernorm.weight"], eps).reshape(s, b, -1)
        k = rmsnorm_oracle(k.reshape(s, b, groups, d), P["self_attention.k_layernorm.weight"], eps).reshape(s, b, -1)
    q, k = rope_oracle(q, positions, d, base), rope_oracle(k, positions, d, base)
    qh = q.reshape(s, b, heads, d).permute(1, 2, 0, 3)
    kh = k.reshape(s, b, groups, d).repeat_interleave(per, dim=2).permute(1, 2, 0, 3)
    vh = v.reshape(s, b, groups, d).repeat_interleave(per, dim=2).permute(1, 2, 0, 3)
    seq = torch.zeros(s, dtype=torch.long)
    for i, start in enumerate(cu_seqlens[1:-1] if cu_seqlens else []):
        seq[start:] = i + 1
    visible = torch.ones(s, s, dtype=torch.bool).tril() & (seq[:, None] == seq[None, :])
    scores = torch.matmul(qh, kh.transpose(-1, -2)) / math.sqrt(d)
    probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    o = torch.matmul(probs, vh).permute(2, 0, 1, 3).reshape(s, b, heads * d)
    x_mid = x + F.linear(o, P["self_attention.linear_proj.weight"])
    m = rmsnorm_oracle(x_mid, P["pre_mlp_layernorm.weight"], eps)
    gated = F.silu(F.linear(m, P["mlp.linear_gate.weight"])) * F.linear(m, P["mlp.linear_up.weight"])
    return x_mid + F.linear(gated, P["mlp.linear_fc2.weight"])


def case_llama_layer(out, name, seed, s, b, h, heads, groups, ffn, positions, qk_layernorm, cu_seqlens, what):
    """x N(0, 1); every matrix N(0, 0.2²), every norm weight N(1, 0.1²) (names as reference/llama_layer.h
    with an empty prefix, stored as w.<name>; their gradients as g.<name>); dy N(0, 1)."""
    g = torch.Generator().manual_seed(seed)
    eps, base, d = f32(1e-5), f32(10000.0), h // heads
    c = Case(out, name, what, {"heads": heads, "query_groups": groups, "ffn": ffn, "eps": eps, "rotary_base": base,
                               "positions": positions, "qk_layernorm": qk_layernorm, "cu_seqlens": cu_seqlens})
    shapes = {"input_layernorm.weight": [h], "self_attention.linear_q.weight": [heads * d, h],
              "self_attention.linear_k.weight": [groups * d, h], "self_attention.linear_v.weight": [groups * d, h],
              "self_attention.linear_proj.weight": [h, heads * d], "pre_mlp_layernorm.weight": [h],
              "mlp.linear_gate.weight": [ffn, h], "mlp.linear_up.weight": [ffn, h], "mlp.linear_fc2.weight": [h, ffn]}
    if qk_layernorm:
        shapes["self_attention.q_layernorm.weight"] = [d]
        shapes["self_attention.k_layernorm.weight"] = [d]
    x = leaf(randn(g, s, b, h))
    P = {n: leaf(randn(g, *sh, scale=0.1, shift=1.0) if n.endswith("layernorm.weight") else randn(g, *sh, scale=0.2))
         for n, sh in shapes.items()}
    y = llama_layer_oracle(x, P, heads, groups, eps, base, positions, qk_layernorm, cu_seqlens)
    dy = randn(g, s, b, h)
    grads = grads_of(y, dy, (x, *P.values()))
    c.f32("x", x, f"input [s={s}, b={b}, h={h}]")
    c.f32("y", y, "layer output [s, b, h]")
    c.f32("dy", dy, "upstream gradient [s, b, h]")
    c.f32("dx", grads[0], "dx [s, b, h]")
    for (n, w), gw in zip(P.items(), grads[1:]):
        c.f32("w." + n, w, f"parameter {n} {list(w.shape)}")
        c.f32("g." + n, gw, f"gradient of {n}")


def cases(out):
    case_rmsnorm(out, "rmsnorm", 122, 1e-5, lambda g: randn(g, 5, 3, 24, scale=2.0), "N(0, 2²)",
                 "RMSNorm over the last dim (eps 1e-5), forward and backward")
    case_rmsnorm(out, "rmsnorm_large", 123, 1e-6, rmsnorm_large_x,
                 "rows N(±300, 2²) (sign alternating by row); row 5 (flat) is 3e19·N(0, 1)",
                 "RMSNorm (eps 1e-6), h = 37, on rows whose mean square (≈ 9e4) is their squared offset ±300, and one "
                 "row at 3e19 whose squares overflow float32 (the sum of squares must be in double)")
    case_swiglu(out)
    case_rope(out, "rope", 125, 6, 2, 3, 8, [4, 5, 6, 7, 8, 9], 10000.0,
              "rotary embedding (non-interleaved pairs i, i+d/2) of [6, 2, 3·8] at positions 4..9: the rows a "
              "sequence shard at offset 4 holds under SP")
    case_rope(out, "rope_packed", 126, 7, 1, 2, 6, [0, 1, 2, 0, 1, 0, 1000], 500.0,
              "rotary embedding of packed sequences (positions restart at 0 per sequence; one at 1000), base 500")
    case_gqa(out, "attention_gqa", 127, 6, 2, 6, 2, 4, [[1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 1]],
             "causal grouped-query attention, 6 query heads on 2 key/value groups (d = 4), key padding mask "
             "(row 1's first key padded: query 0 sees nothing)")
    case_gqa(out, "attention_mqa", 128, 5, 1, 3, 1, 5, None,
             "causal multi-query attention: 3 query heads share one key/value group (d = 5)")
    case_llama_layer(out, "llama_layer", 129, 6, 2, 16, 4, 2, 24, list(range(6)), False, [],
                     "one Llama layer, h = 16, 4 query heads on 2 key/value groups (d = 4), ffn = 24, RoPE base 1e4 "
                     "at positions 0..5, forward and backward of every parameter")
    case_llama_layer(out, "llama_layer_qknorm_packed", 130, 7, 1, 12, 2, 1, 10, [0, 1, 2, 0, 1, 2, 3], True,
                     [0, 3, 7], "one Llama layer with qk_layernorm, multi-query (2 heads, 1 group, d = 6), two "
                     "packed sequences (3 and 4 tokens; positions restart)")
