#!/usr/bin/python3
"""The PyTorch peer of bench/bench_gpt_step.cpp: one whole training step of the same GPT, fp32, TP(+SP).

Architecture (reference/gpt.h, Megatron-LM names): vocab-parallel word embedding [V/tp, h] + learned
positions → L × pre-LN layer (LayerNorm → column-parallel linear_qkv [3h/tp, h], per-head [q|k|v]
blocks → causal softmax attention over heads/tp local heads → row-parallel linear_proj [h, h/tp] →
residual; LayerNorm → column-parallel linear_fc1 [ffn/tp, h] → GELU tanh → row-parallel linear_fc2
[h, ffn/tp] → residual) → final LayerNorm → output layer tied to the word embedding (column-parallel,
no gather) → vocab-parallel cross entropy (Megatron's _VocabParallelCrossEntropy: all-reduces of the row
max, the target logit and Σexp). Dropout 0 (not called). With SP the embedding's output is
reduce-scattered to [s/tp, b, h], every column-parallel input is all-gathered (again in backward for
the weight gradient) and every row-parallel output reduce-scattered (peer_common.py); after backward
the gradients of the replicated parameters (LayerNorms, row-parallel biases, position embeddings) are
summed over TP in one coalesced all-reduce, as the engine's finalize_grads.

A step: main_grad buffers zeroed, forward, backward (linear weight gradients accumulate into f32
main_grad with addmm_, β = 1; the other parameters' .grad is added into main_grad, Megatron's
gradient-accumulation hook), the SP gradient sum, torch.optim.AdamW (lr 1e-3, betas (0.9, 0.999),
eps 1e-8, weight decay 0.01, the engine's defaults; single-tensor implementation, 1.13's CPU default)
reading main_grad. Timed in the same run, alternating: the step's GEMMs alone (linear layers' forward,
dgrad, wgrad and attention's batched products, same shapes). Prints `RESULT gpt impl=torch ...`.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402  (sets the thread variables before torch is imported)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

Linear = pc.LinearWithGradAccumulation.apply


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Mean cross entropy over n rows of logits [n, V/tp] split by vocabulary (Megatron-LM
    tensor_parallel/cross_entropy.py): three all-reduces (max, target logit, Σexp), softmax saved."""

    @staticmethod
    def forward(ctx, logits, target, start):
        logits_max = logits.max(dim=-1)[0]
        if dist.get_world_size() > 1:
            dist.all_reduce(logits_max, op=dist.ReduceOp.MAX)
        logits = logits - logits_max.unsqueeze(-1)
        vl = logits.shape[-1]
        outside = (target < start) | (target >= start + vl)
        local = (target - start).masked_fill(outside, 0)
        predicted = logits.gather(-1, local.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
        pc.all_reduce(predicted)
        exp = logits.exp_()
        sum_exp = exp.sum(dim=-1)
        pc.all_reduce(sum_exp)
        loss = torch.log(sum_exp) - predicted
        ctx.save_for_backward(exp.div_(sum_exp.unsqueeze(-1)), local, outside)
        return loss.mean()

    @staticmethod
    def backward(ctx, dloss):
        softmax, local, outside = ctx.saved_tensors
        grad = softmax  # softmax − one_hot(target), scaled; in place as Megatron does
        rows = torch.arange(grad.shape[0])
        grad[rows, local] -= (~outside).to(grad.dtype)
        return grad.mul_(dloss / grad.shape[0]), None, None


def attention(qkv, heads):
    """Causal MHA on [s, b, heads·3d] with per-head [q|k|v] blocks → [s, b, heads·d]."""
    s, b, w = qkv.shape
    d = w // (3 * heads)
    q, k, v = qkv.reshape(s, b, heads, 3, d).permute(3, 1, 2, 0, 4)  # each [b, heads, s, d]
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    causal = torch.ones(s, s, dtype=torch.bool).triu_(1)
    probs = F.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
    return torch.matmul(probs, v).permute(2, 0, 1, 3).reshape(s, b, heads * d)


class GPT:
    """This rank's shards of the GPT; parameters with f32 main_grad buffers (peer_common.parameter)."""

    def __init__(self, a, rank, gen):
        self.a, self.rank, self.tp, self.sp = a, rank, a.tp, a.sp
        h, f, t, V = a.hidden, 4 * a.hidden, a.tp, a.vocab

        def normal(*shape, std=0.02):
            return torch.randn(*shape, generator=gen) * std

        def rows(x):  # column-parallel shard (dim 0)
            n = x.shape[0] // t
            return x[rank * n:(rank + 1) * n].contiguous()

        def cols(x):  # row-parallel shard (dim 1)
            n = x.shape[1] // t
            return x[:, rank * n:(rank + 1) * n].contiguous()

        P, scaled = pc.parameter, 0.02 / math.sqrt(2 * a.layers)
        self.wte = P(rows(normal(V, h)))
        self.wpe = P(normal(a.seq, h))
        self.layers = []
        for _ in range(a.layers):
            self.layers.append({
                "ln1_w": P(torch.ones(h)), "ln1_b": P(torch.zeros(h)),
                "qkv_w": P(rows(normal(3 * h, h))), "qkv_b": P(torch.zeros(3 * h // t)),
                "proj_w": P(cols(normal(h, h, std=scaled))), "proj_b": P(torch.zeros(h)),
                "ln2_w": P(torch.ones(h)), "ln2_b": P(torch.zeros(h)),
                "fc1_w": P(rows(normal(f, h))), "fc1_b": P(torch.zeros(f // t)),
                "fc2_w": P(cols(normal(h, f, std=scaled))), "fc2_b": P(torch.zeros(h))})
        self.lnf_w, self.lnf_b = P(torch.ones(h)), P(torch.zeros(h))
        self.params = [self.wte, self.wpe] + [p for L in self.layers for p in L.values()] + \
            [self.lnf_w, self.lnf_b]
        # Summed over TP after backward under SP: every replicated parameter (the engine's ShardSpec).
        self.sp_params = [self.wpe, self.lnf_w, self.lnf_b] + \
            [L[k] for L in self.layers for k in ("ln1_w", "ln1_b", "proj_b", "ln2_w", "ln2_b", "fc2_b")]

    def row_parallel(self, x, w, b):
        """Partial X_r·B_rᵀ summed over TP (all-reduce, or reduce-scatter under SP), + the full bias."""
        partial = Linear(x, w, None, False, False)
        if self.sp:
            return pc.ReduceScatterToSequenceParallelRegion.apply(partial) + b
        return pc.ReduceFromTensorParallelRegion.apply(partial) + b

    def column_parallel(self, x, w, b):
        """X·A_rᵀ + b_r: X all-gathered first under SP, dX all-reduced (TP) or reduce-scattered (SP)."""
        return Linear(x, w, b, self.tp > 1 and not self.sp, self.sp)

    def loss(self, ids, targets):
        """ids, targets [b, s] → mean loss (this rank's view; the same on every TP rank)."""
        a, h = self.a, self.a.hidden
        s, vl = ids.shape[1], self.wte.shape[0]
        emb, start = pc.vocab_parallel_embedding(ids, self.wte, self.rank)  # [s, b, h] partial over TP
        if self.sp:
            x = pc.ReduceScatterToSequenceParallelRegion.apply(emb)
            first = self.rank * (s // self.tp)
        else:
            x = pc.ReduceFromTensorParallelRegion.apply(emb)
            first = 0
        x = x + self.wpe[first:first + x.shape[0]].unsqueeze(1)
        for L in self.layers:
            ln1 = F.layer_norm(x, (h,), L["ln1_w"], L["ln1_b"], 1e-5)
            o = attention(self.column_parallel(ln1, L["qkv_w"], L["qkv_b"]), a.heads // self.tp)
            x = x + self.row_parallel(o, L["proj_w"], L["proj_b"])
            ln2 = F.layer_norm(x, (h,), L["ln2_w"], L["ln2_b"], 1e-5)
            u = F.gelu(self.column_parallel(ln2, L["fc1_w"], L["fc1_b"]), approximate="tanh")
            x = x + self.row_parallel(u, L["fc2_w"], L["fc2_b"])
        y = F.layer_norm(x, (h,), self.lnf_w, self.lnf_b, 1e-5)
        logits = Linear(y, self.wte, None, self.tp > 1 and not self.sp, self.sp)  # [s, b, V/tp]
        return VocabParallelCrossEntropy.apply(logits.reshape(-1, vl), targets.t().reshape(-1), start)

    def finalize_grads(self):
        """.grad into main_grad, then under SP the coalesced TP sum (peer_common.finalize_grads)."""
        pc.finalize_grads(self.params, self.sp_params, self.sp, self.tp)


def step_gemms(a, gen):
    """Every GEMM of one step with its shapes, alone: per layer forward / dgrad / wgrad of qkv, proj,
    fc1, fc2 and attention's six batched products [b, heads/tp, s, d]; the output layer's three."""
    n, h, t, f = a.seq * a.batch, a.hidden, a.tp, 4 * a.hidden
    r = lambda *shape: torch.randn(*shape, generator=gen)  # noqa: E731
    linears = []
    for _ in range(a.layers):
        for i, o in ((h, 3 * h // t), (h // t, h), (h, f // t), (f // t, h)):
            linears.append((r(n, i), r(o, i), r(n, o), torch.zeros(o, i)))
    linears.append((r(n, h), r(a.vocab // t, h), r(n, a.vocab // t), torch.zeros(a.vocab // t, h)))
    bh, s, d = (a.batch, a.heads // t), a.seq, a.hidden // a.heads
    attn = [r(*bh, s, d) for _ in range(4)] + [r(*bh, s, s) for _ in range(2)]  # q k v dO, P dS
    return pc.StepGemms(linears, attn, a.layers)


def rank_main(rank, world, a):
    """One TP rank: builds its shards, times the steps and the GEMMs alone; rank 0 prints RESULT."""
    gen = torch.Generator().manual_seed(a.seed)
    model = GPT(a, rank, gen)
    fields = {"impl": "torch", "tp": a.tp, "sp": int(a.sp), "layers": a.layers, "h": a.hidden, "heads": a.heads,
              "s": a.seq, "b": a.batch, "V": a.vocab, "steps": a.steps}
    pc.time_model_steps(rank, a, model, gen, lambda: step_gemms(a, gen), "gpt", fields)


def main():
    """Parses the flags (those of bench_gpt_step) and spawns --tp ranks."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    pc.model_arguments(p)
    a = p.parse_args()
    if a.heads % a.tp or a.hidden % a.heads or a.vocab % a.tp or (a.sp and a.seq % a.tp):
        p.error("need heads % tp == 0, hidden % heads == 0, vocab % tp == 0 (no padding here) and, with "
                "--sp, seq % tp == 0")
    pc.spawn(a.tp, rank_main, a)


if __name__ == "__main__":
    main()
