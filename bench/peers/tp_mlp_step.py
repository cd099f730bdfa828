#!/usr/bin/python3
"""The PyTorch peer of bench/bench_mlp_step.cpp: one Megatron tensor-parallel MLP training step, fp32.

  forward   X [s, b, h] (or this rank's [s/tp, b, h] under SP)
            → column-parallel linear, weight [ffn/tp, h] (under SP X is all-gathered to [s, b, h] first)
            → F.gelu(approximate="tanh") → row-parallel linear, weight [h, ffn/tp]
            → all-reduce of the output (TP) or reduce-scatter to [s/tp, b, h] (SP) → + bias
  backward  autograd through Megatron-style Functions (peer_common.py): the all-reduce of dX (TP) or,
            with SP, the all-gather of dY, X gathered again for the weight gradient, and the
            reduce-scatter of dX; weight gradients accumulate into f32 main_grad (addmm_, β = 1).

Timed in the same run, alternating with the steps: the six matmul calls of the step alone, same shapes.
Prints `RESULT mlp impl=torch tp=… step_s=… gemm_s=… gemm_frac=…` like the engine (seconds; per step
the slowest rank, median over steps). Run: /usr/bin/python3 bench/peers/tp_mlp_step.py --tp 2 --sp
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402  (sets the thread variables before torch is imported)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def shards(a, rank, gen):
    """This rank's parameters: W1 rows [r·f/tp, (r+1)·f/tp) of [f, h], b1 the same rows, W2 the same
    columns of [h, f], b2 [h] whole (whole tensors drawn from one seeded generator, then sliced)."""
    f, fl = a.ffn, a.ffn // a.tp
    w1 = torch.randn(f, a.hidden, generator=gen) * 0.02
    b1 = torch.randn(f, generator=gen) * 0.02
    w2 = torch.randn(a.hidden, f, generator=gen) * 0.02
    b2 = torch.randn(a.hidden, generator=gen) * 0.02
    sl = slice(rank * fl, (rank + 1) * fl)
    return [pc.parameter(t.contiguous()) for t in (w1[sl], b1[sl], w2[:, sl], b2)]


def mlp_step(x, dy, w1, b1, w2, b2, tp, sp):
    """Forward and backward of one step; x [s(/tp), b, h] requires grad; dy shaped like the output."""
    y1 = pc.LinearWithGradAccumulation.apply(x, w1, b1, tp > 1 and not sp, sp)  # [s, b, f/tp]
    partial = pc.LinearWithGradAccumulation.apply(F.gelu(y1, approximate="tanh"), w2, None, False, False)
    if sp:
        y = pc.ReduceScatterToSequenceParallelRegion.apply(partial)  # [s/tp, b, h]
    else:
        y = pc.ReduceFromTensorParallelRegion.apply(partial)  # [s, b, h]
    y = y + b2
    y.backward(dy)


def gemm_only(x, a, dy1, dy2, w1, w2):
    """The six matmul calls of the step with its shapes: X [s, b, h] whole, A [s, b, f/tp]."""
    with torch.no_grad():
        torch.matmul(x, w1.t())
        torch.matmul(a, w2.t())
        dy2.matmul(w2)
        w2.main_grad.addmm_(dy2.reshape(-1, dy2.shape[-1]).t(), a.reshape(-1, a.shape[-1]))
        dy1.matmul(w1)
        w1.main_grad.addmm_(dy1.reshape(-1, dy1.shape[-1]).t(), x.reshape(-1, x.shape[-1]))


def rank_main(rank, world, a):
    """One TP rank: builds its shards and inputs, times the steps and the GEMMs alone; rank 0 prints."""
    gen = torch.Generator().manual_seed(a.seed)
    w1, b1, w2, b2 = shards(a, rank, gen)
    s, b, h, fl = a.seq, a.batch, a.hidden, a.ffn // a.tp
    x_whole = torch.randn(s, b, h, generator=gen)
    dy_whole = torch.randn(s, b, h, generator=gen)
    rows = s // a.tp if a.sp else s
    x = x_whole[rank * rows:(rank + 1) * rows].clone().requires_grad_(True) if a.sp else \
        x_whole.clone().requires_grad_(True)
    dy = dy_whole[rank * rows:(rank + 1) * rows].clone() if a.sp else dy_whole
    act, dy1 = torch.randn(s, b, fl, generator=gen), torch.randn(s, b, fl, generator=gen)

    def step():
        x.grad = None  # the engine returns a fresh dX each step
        mlp_step(x, dy, w1, b1, w2, b2, a.tp, a.sp)

    def gemms():
        gemm_only(x_whole, act, dy1, dy_whole, w1, w2)

    t_step, t_gemm = pc.time_alternating(a.warmup, a.steps, step, gemms if a.gemm else None)
    if rank == 0:
        fields = {"impl": "torch", "tp": a.tp, "sp": int(a.sp), "s": s, "b": b, "h": h, "ffn": a.ffn,
                  "steps": a.steps, "blas_threads": torch.get_num_threads()}
        fields.update(pc.timing_fields(t_step, t_gemm))
        if t_gemm:
            fields["gemm_gflops"] = 6.0 * 2.0 * s * b * h * fl / fields["gemm_s"] / 1e9
        pc.result_line("mlp", fields)


def main():
    """Parses the flags (those of bench_mlp_step) and spawns --tp ranks."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size (ranks to spawn)")
    p.add_argument("--sp", action="store_true", help="sequence parallelism")
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--ffn", type=int, default=0, help="MLP width (0: 4h)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--no-gemm", dest="gemm", action="store_false", help="skip the GEMMs-alone pass")
    a = p.parse_args()
    a.ffn = a.ffn or 4 * a.hidden
    if a.ffn % a.tp or (a.sp and a.seq % a.tp):
        p.error(f"ffn={a.ffn} and (with --sp) s={a.seq} must be divisible by tp={a.tp}")
    pc.spawn(a.tp, rank_main, a)


if __name__ == "__main__":
    main()
