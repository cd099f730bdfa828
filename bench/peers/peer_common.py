"""What the PyTorch peers of the step benchmarks share (the C++ side is bench/bench_common.h).

One BLAS/OpenMP thread per rank, ranks spawned with torch.multiprocessing on a gloo file:// rendezvous,
Megatron-LM's communication helpers and mappings (megatron/core/tensor_parallel/mappings.py) as autograd
Functions, per-step timings reduced over ranks, and the RESULT line that bench/run_bench.py parses.
Run with Debian's /usr/bin/python3 (python3-torch 1.13).
"""
import os

# Before torch is imported anywhere: OpenBLAS and OpenMP read these when they are loaded, and spawned
# ranks inherit them.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def _rank_entry(rank, world, store_dir, fn, args):
    """One spawned rank: one thread, the gloo world, fn(rank, world, *args), the group torn down."""
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_dir}/store", rank=rank, world_size=world)
    try:
        fn(rank, world, *args)
    finally:
        dist.destroy_process_group()


def spawn(world, fn, *args):
    """Runs fn(rank, world, *args) on `world` spawned ranks, each with one intra-op and one inter-op
    thread and the default gloo process group (file:// rendezvous in a fresh directory)."""
    with tempfile.TemporaryDirectory(prefix="tpsp-peer-") as d:
        mp.spawn(_rank_entry, args=(world, d, fn, args), nprocs=world, join=True)


# ---- communication helpers (Megatron's _reduce, _gather_along_first_dim, _reduce_scatter_along_first_dim)

def all_reduce(x):
    """Sum over the group, in place; returns x. Identity at world size 1."""
    if dist.get_world_size() > 1:
        dist.all_reduce(x)
    return x


def all_gather_dim0(x):
    """[s/n, ...] on each rank → [s, ...], rank r's rows at [r·s/n, (r+1)·s/n)."""
    n = dist.get_world_size()
    if n == 1:
        return x
    x = x.contiguous()
    out = torch.empty((n * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype)
    dist.all_gather(list(out.chunk(n)), x)  # chunks of dim 0 are contiguous views: gathered in place
    return out


def reduce_scatter_dim0(x):
    """[s, ...] on each rank → [s/n, ...]: this rank's rows of the sum over ranks.

    torch 1.13's gloo has no reduce_scatter. This one is all_to_all_single (which gloo has) followed by a
    local sum of the n received chunks: each rank sends and receives (n−1)/n of its buffer, the same bytes
    as a ring reduce-scatter (and at n = 2 exactly the ring's single exchange of half the buffer), with
    one local pass to add. Chosen over all_reduce + slice, which moves twice the bytes (2(n−1)/n), and over
    a hand-written send/recv ring, which needs n−1 round trips and n−1 adds for the same traffic.
    """
    n = dist.get_world_size()
    if n == 1:
        return x
    x = x.contiguous()
    recv = torch.empty_like(x)
    dist.all_to_all_single(recv, x)  # recv chunk j = rank j's chunk for this rank
    return recv.view((n, x.shape[0] // n) + tuple(x.shape[1:])).sum(0)


# ---- the mappings: forward / backward pairs (megatron/core/tensor_parallel/mappings.py)

class ReduceFromTensorParallelRegion(torch.autograd.Function):
    """g: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        return all_reduce(x.contiguous())

    @staticmethod
    def backward(ctx, dy):
        return dy


class ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    """SP: reduce-scatter along the sequence forward, all-gather backward."""

    @staticmethod
    def forward(ctx, x):
        return reduce_scatter_dim0(x)

    @staticmethod
    def backward(ctx, dy):
        return all_gather_dim0(dy)


class LinearWithGradAccumulation(torch.autograd.Function):
    """Y = X·Wᵀ + b with the weight gradient accumulated into w.main_grad (f32, β = 1) and no .grad:
    Megatron's LinearWithGradAccumulationAndAsyncCommunication with gradient_accumulation_fusion, run
    synchronously (no overlap, like the engine today). With sequence_parallel, X [s/tp, b, in] is
    all-gathered in forward and gathered AGAIN in backward for the weight gradient (only the shard is
    saved), and dX leaves through a reduce-scatter; with allreduce_dgrad, dX is all-reduced (f's
    backward, as Megatron's async_grad_allreduce). x: [s(/tp), b, in]; w: [out, in]; b: [out] or None."""

    @staticmethod
    def forward(ctx, x, w, b, allreduce_dgrad, sequence_parallel):
        ctx.save_for_backward(x, w)
        ctx.has_bias = b is not None
        ctx.allreduce_dgrad, ctx.sequence_parallel = allreduce_dgrad, sequence_parallel
        total = all_gather_dim0(x) if sequence_parallel else x
        y = torch.matmul(total, w.t())
        return y + b if b is not None else y

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        total = all_gather_dim0(x) if ctx.sequence_parallel else x
        dx = dy.matmul(w)
        if ctx.sequence_parallel:
            dx = reduce_scatter_dim0(dx)
        elif ctx.allreduce_dgrad:
            dx = all_reduce(dx)
        dy2 = dy.reshape(-1, dy.shape[-1])
        w.main_grad.addmm_(dy2.t(), total.reshape(-1, total.shape[-1]))
        db = dy2.sum(0) if ctx.has_bias else None
        return dx, None, db, None, None


def parameter(t):
    """A leaf parameter with an f32 main_grad buffer (zero), Megatron's gradient buffer."""
    p = torch.nn.Parameter(t)
    p.main_grad = torch.zeros_like(t)
    return p


# ---- timing and the result line

def timed(fn):
    """Seconds of fn() on this rank, started after a barrier so that the ranks start together."""
    dist.barrier()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def time_alternating(warmup, steps, step, gemm=None):
    """`warmup` untimed rounds, then `steps` timed rounds of step() and, unless gemm is None, gemm()
    (alternating, so that load on the machine hits both alike). Returns (step seconds, gemm seconds),
    each a list over steps of the slowest rank's time ([] for gemm when None)."""
    t_step, t_gemm = [], []
    for i in range(warmup + steps):
        s = timed(step)
        g = timed(gemm) if gemm is not None else 0.0
        if i >= warmup:
            t_step.append(s)
            t_gemm.append(g)
    return max_over_ranks(t_step), (max_over_ranks(t_gemm) if gemm is not None else [])


def timing_fields(t_step, t_gemm):
    """The RESULT fields of the timings: step_s (median), step_min_s, step_max_s and, when the GEMMs were
    timed, gemm_s (median) and gemm_frac = gemm_s / step_s."""
    out = {"step_s": median(t_step), "step_min_s": min(t_step), "step_max_s": max(t_step)}
    if t_gemm:
        out["gemm_s"] = median(t_gemm)
        out["gemm_frac"] = out["gemm_s"] / out["step_s"]
    return out


def max_over_ranks(seconds):
    """Per step, the slowest rank's seconds (one all-reduce of the list)."""
    t = torch.tensor(seconds, dtype=torch.float64)
    if dist.get_world_size() > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def result_line(bench, fields):
    """`RESULT <bench> key=value ...` (floats with 6 significant digits), as bench/bench_common.h."""
    parts = [f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items()]
    print("RESULT " + bench + " " + " ".join(parts), flush=True)


def median(v):
    """The median of a list of numbers (the mean of the middle two for an even count)."""
    return statistics.median(v)


# ---- one training step of a whole model, timed against its GEMMs alone (gpt_step.py, llama_step.py)

class StepGemms:
    """Every GEMM of one step alone: `linears` (x [n, in], w [out, in], dy [n, out], dw [out, in]) each run
    forward / dgrad / wgrad, then per layer attention's six batched products on
    attn = [q, k, v, dO ([b, heads/tp, s, d]), P, dS ([b, heads/tp, s, s])]."""

    def __init__(self, linears, attn, layers):
        self.linears, self.attn, self.layers = linears, attn, layers

    def run(self):
        with torch.no_grad():
            for x, w, dy, dw in self.linears:
                torch.matmul(x, w.t())
                dy.matmul(w)
                dw.addmm_(dy.t(), x)
            q, k, v, dout, p, ds = self.attn
            for _ in range(self.layers):
                torch.matmul(q, k.transpose(-1, -2))
                torch.matmul(p, v)
                torch.matmul(p.transpose(-1, -2), dout)
                torch.matmul(dout, v.transpose(-1, -2))
                torch.matmul(ds, k)
                torch.matmul(ds.transpose(-1, -2), q)


def time_model_steps(rank, a, model, gen, make_gemms, bench, fields):
    """Times a.steps training steps of `model` (params with main_grad, loss(ids, targets),
    finalize_grads()) on one batch drawn from gen — main_grad zeroed, forward, backward, the gradient
    sums, torch.optim.AdamW (lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01, the engine's
    defaults) reading main_grad — alternating with make_gemms()'s run() unless a.gemm is off; rank 0
    prints `RESULT <bench>` with `fields`, blas_threads, loss0 and the timings."""
    opt = torch.optim.AdamW(model.params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)
    targets = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)
    gemms = make_gemms()
    losses = []

    def step():
        for p in model.params:
            p.main_grad.zero_()
        loss = model.loss(ids, targets)
        loss.backward()
        model.finalize_grads()
        for p in model.params:
            p.grad = p.main_grad  # the optimizer reads main_grad (Megatron's main-grad copy is a view)
        opt.step()
        for p in model.params:
            p.grad = None
        losses.append(loss.item())

    t_step, t_gemm = time_alternating(a.warmup, a.steps, step, gemms.run if a.gemm else None)
    if rank == 0:
        out = dict(fields, blas_threads=torch.get_num_threads(), loss0=losses[0])
        out.update(timing_fields(t_step, t_gemm))
        result_line(bench, out)


def vocab_parallel_embedding(ids, wte, rank):
    """ids [b, s] → (this rank's partial embedding [s, b, h], its first vocabulary row): rows of ids
    outside [start, start + V/tp) are zero, so the TP sum is the whole embedding (Megatron's
    VocabParallelEmbedding)."""
    vl = wte.shape[0]
    start = rank * vl
    ids_sb = ids.t()  # [s, b]
    outside = (ids_sb < start) | (ids_sb >= start + vl)
    emb = torch.nn.functional.embedding((ids_sb - start).masked_fill(outside, 0), wte)
    return emb.masked_fill(outside.unsqueeze(-1), 0.0), start


def finalize_grads(params, sp_params, sp, tp):
    """.grad into main_grad (Megatron's gradient-accumulation hook), then under SP the coalesced TP sum
    of the replicated parameters' gradients (the engine's finalize_grads)."""
    for p in params:
        if p.grad is not None:
            p.main_grad.add_(p.grad)
            p.grad = None
    if sp and tp > 1:
        flat = torch.cat([p.main_grad.reshape(-1) for p in sp_params])
        dist.all_reduce(flat)
        offset = 0
        for p in sp_params:
            p.main_grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()


def model_arguments(p):
    """The flags the whole-model peers share with bench_gpt_step (argparse parser p)."""
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size (ranks to spawn)")
    p.add_argument("--sp", action="store_true", help="sequence parallelism")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--no-gemm", dest="gemm", action="store_false", help="skip the GEMMs-alone pass")
