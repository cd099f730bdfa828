#!/usr/bin/python3
"""The PyTorch peer of bench_gpt_step --model llama: one whole training step of the same Llama model, fp32, TP(+SP).

Architecture (engine/model/llama_layer.h, Megatron-LM names): vocab-parallel word embedding [V/tp, h], no
position table → L × layer (RMSNorm → column-parallel linear_qkv of the per-group fused weight
[groups/tp·(heads/groups + 2)·d, h], no bias → rotary embedding of q and k (pairs i, i + d/2, positions
0..s−1, after SP's gather) → causal attention of the rank's heads on their group's k and v
(repeat_interleave) → row-parallel linear_proj [h, heads/tp·d] → residual; RMSNorm → column-parallel
linear_fc1 [2·ffn/tp, h] = [gate_r | up_r] → SwiGLU → row-parallel linear_fc2 [h, ffn/tp] → residual) →
final RMSNorm → untied column-parallel output layer → vocab-parallel cross entropy (gpt_step.py's).
RMSNorm is its own formula (torch 1.13 has none). Only layouts with groups % tp == 0 (whole groups per
rank). Whole weights are drawn in one order and sharded, so every layout trains the same model (loss0 is
the same at tp=1, tp=2 and tp=2+SP). With SP: the gathers and reduce-scatters of peer_common.py, and after
backward the RMSNorm weights' gradients summed over TP in one coalesced all-reduce, as finalize_grads.

A step as gpt_step.py's: main_grad zeroed, forward, backward (linear weight gradients into f32 main_grad),
the SP sum, torch.optim.AdamW reading main_grad. Timed alternating with the step's GEMMs alone. Prints
`RESULT llama impl=torch ...`.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402  (sets the thread variables before torch is imported)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from gpt_step import VocabParallelCrossEntropy  # noqa: E402

Linear = pc.LinearWithGradAccumulation.apply


def rms_norm(x, w, eps=1e-5):
    """x·w / √(mean(x²) + eps) over the last dim."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, cos, sin):
    """x [s, b, n, d] rotated in pairs (i, i + d/2) by the position's angles: cos, sin [s, 1, 1, d/2]."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Llama:
    """This rank's shards of the Llama model; parameters with f32 main_grad buffers (peer_common.parameter)."""

    def __init__(self, a, rank, gen):
        self.a, self.rank, self.tp, self.sp = a, rank, a.tp, a.sp
        h, f, t, V, d = a.hidden, 4 * a.hidden, a.tp, a.vocab, a.hidden // a.heads
        self.groups_local, self.per = a.groups // t, a.heads // a.groups

        def normal(*shape, std=0.02):  # whole tensors, drawn in the same order at every tp
            return torch.randn(*shape, generator=gen) * std

        def rows(x):  # column-parallel shard (dim 0); whole groups for the per-group fused QKV
            n = x.shape[0] // t
            return x[rank * n:(rank + 1) * n].contiguous()

        def cols(x):  # row-parallel shard (dim 1)
            n = x.shape[1] // t
            return x[:, rank * n:(rank + 1) * n].contiguous()

        def stride2(x):  # [W_gate; W_up] → [gate_r; up_r] (Megatron's stride 2)
            gate, up = x.chunk(2, dim=0)
            return torch.cat((rows(gate), rows(up)))

        P, scaled = pc.parameter, 0.02 / math.sqrt(2 * a.layers)
        self.wte, self.wout = P(rows(normal(V, h))), P(rows(normal(V, h)))
        self.layers = []
        for _ in range(a.layers):
            self.layers.append({
                "ln1_w": P(torch.ones(h)),
                "qkv_w": P(rows(normal(a.groups * (self.per + 2) * d, h))),
                "proj_w": P(cols(normal(h, a.heads * d, std=scaled))),
                "ln2_w": P(torch.ones(h)),
                "fc1_w": P(stride2(normal(2 * f, h))),
                "fc2_w": P(cols(normal(h, f, std=scaled)))})
        self.lnf_w = P(torch.ones(h))
        self.params = [self.wte, self.wout] + [p for L in self.layers for p in L.values()] + [self.lnf_w]
        self.sp_params = [self.lnf_w] + [L[k] for L in self.layers for k in ("ln1_w", "ln2_w")]
        theta = 10000.0 ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
        angle = torch.arange(a.seq, dtype=torch.float64)[:, None] * theta[None, :]
        self.cos = angle.cos().float()[:, None, None, :]
        self.sin = angle.sin().float()[:, None, None, :]

    def row_parallel(self, x, w):
        """Partial X_r·B_rᵀ summed over TP (all-reduce, or reduce-scatter under SP); no bias."""
        partial = Linear(x, w, None, False, False)
        if self.sp:
            return pc.ReduceScatterToSequenceParallelRegion.apply(partial)
        return pc.ReduceFromTensorParallelRegion.apply(partial)

    def column_parallel(self, x, w):
        """X·A_rᵀ: X all-gathered first under SP, dX all-reduced (TP) or reduce-scattered (SP)."""
        return Linear(x, w, None, self.tp > 1 and not self.sp, self.sp)

    def attention(self, qkv):
        """[s, b, groups_local·(per + 2)·d] → [s, b, groups_local·per·d]: RoPE, GQA, causal softmax."""
        s, b, _ = qkv.shape
        g, per, d = self.groups_local, self.per, self.a.hidden // self.a.heads
        x = qkv.reshape(s, b, g, per + 2, d)
        q = rope(x[:, :, :, :per].reshape(s, b, g * per, d), self.cos[:s], self.sin[:s])
        k = rope(x[:, :, :, per], self.cos[:s], self.sin[:s]).repeat_interleave(per, dim=2)
        v = x[:, :, :, per + 1].repeat_interleave(per, dim=2)
        q, k, v = (y.permute(1, 2, 0, 3) for y in (q, k, v))  # [b, heads_local, s, d]
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
        causal = torch.ones(s, s, dtype=torch.bool).triu_(1)
        probs = F.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
        return torch.matmul(probs, v).permute(2, 0, 1, 3).reshape(s, b, g * per * d)

    def loss(self, ids, targets):
        """ids, targets [b, s] → mean loss (the same on every TP rank)."""
        vl = self.wte.shape[0]
        emb, start = pc.vocab_parallel_embedding(ids, self.wte, self.rank)
        if self.sp:
            x = pc.ReduceScatterToSequenceParallelRegion.apply(emb)
        else:
            x = pc.ReduceFromTensorParallelRegion.apply(emb)
        for L in self.layers:
            o = self.attention(self.column_parallel(rms_norm(x, L["ln1_w"]), L["qkv_w"]))
            x = x + self.row_parallel(o, L["proj_w"])
            gate, up = self.column_parallel(rms_norm(x, L["ln2_w"]), L["fc1_w"]).chunk(2, dim=-1)
            x = x + self.row_parallel(F.silu(gate) * up, L["fc2_w"])
        logits = Linear(rms_norm(x, self.lnf_w), self.wout, None, self.tp > 1 and not self.sp, self.sp)
        return VocabParallelCrossEntropy.apply(logits.reshape(-1, vl), targets.t().reshape(-1), start)

    def finalize_grads(self):
        """.grad into main_grad, then under SP the coalesced TP sum of the RMSNorm weights' gradients."""
        pc.finalize_grads(self.params, self.sp_params, self.sp, self.tp)


def step_gemms(a, gen):
    """Every GEMM of one step alone: per layer forward / dgrad / wgrad of qkv, proj, fc1 ([gate | up]),
    fc2, attention's six batched products [b, heads/tp, s, d]; the output layer's three."""
    n, h, t, f, d = a.seq * a.batch, a.hidden, a.tp, 4 * a.hidden, a.hidden // a.heads
    qkv = a.groups // t * (a.heads // a.groups + 2) * d
    r = lambda *shape: torch.randn(*shape, generator=gen)  # noqa: E731
    linears = []
    for _ in range(a.layers):
        for i, o in ((h, qkv), (a.heads // t * d, h), (h, 2 * f // t), (f // t, h)):
            linears.append((r(n, i), r(o, i), r(n, o), torch.zeros(o, i)))
    linears.append((r(n, h), r(a.vocab // t, h), r(n, a.vocab // t), torch.zeros(a.vocab // t, h)))
    bh, s = (a.batch, a.heads // t), a.seq
    attn = [r(*bh, s, d) for _ in range(4)] + [r(*bh, s, s) for _ in range(2)]
    return pc.StepGemms(linears, attn, a.layers)


def rank_main(rank, world, a):
    """One TP rank: builds its shards, times the steps and the GEMMs alone; rank 0 prints RESULT."""
    gen = torch.Generator().manual_seed(a.seed)
    model = Llama(a, rank, gen)
    fields = {"impl": "torch", "tp": a.tp, "sp": int(a.sp), "layers": a.layers, "h": a.hidden, "heads": a.heads,
              "groups": a.groups, "s": a.seq, "b": a.batch, "V": a.vocab, "steps": a.steps}
    pc.time_model_steps(rank, a, model, gen, lambda: step_gemms(a, gen), "llama", fields)


def main():
    """Parses the flags (those of bench_gpt_step --model llama) and spawns --tp ranks."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    pc.model_arguments(p)
    p.add_argument("--query-groups", dest="groups", type=int, default=4)
    p.add_argument("--model", default="llama", choices=["llama"], help="accepted for the engine's flags")
    a = p.parse_args()
    d = a.hidden // a.heads if a.heads else 0
    if (a.heads % a.tp or a.hidden % a.heads or d % 2 or a.heads % a.groups or a.groups % a.tp
            or a.vocab % a.tp or (a.sp and a.seq % a.tp)):
        p.error("need heads % tp == 0, hidden % heads == 0 with an even head dim, heads % groups == 0, "
                "groups % tp == 0, vocab % tp == 0 and, with --sp, seq % tp == 0")
    pc.spawn(a.tp, rank_main, a)


if __name__ == "__main__":
    main()
