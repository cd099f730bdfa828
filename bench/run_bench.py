#!/usr/bin/python3
"""Runs the engine's step benchmarks against their PyTorch peers and prints one line per ratio.

  mlp   build/bench/bench_mlp_step  vs bench/peers/tp_mlp_step.py   (one Megatron TP MLP step)
  gpt   build/bench/bench_gpt_step  vs bench/peers/gpt_step.py      (one whole GPT training step)
  llama build/bench/bench_gpt_step --model llama vs bench/peers/llama_step.py (the Llama block's step)
  scaling  bench_mlp_step at tp=2 vs tp=1, hidden 512 / 1024 / 2048 (where tp=2 pays on 2 cores)
  collectives  build/bench/bench_collectives: busbw of each collective / raw Gloo all-reduce busbw
  overlap  build/bench/bench_overlap: a TP+SP linear pair at TPSP_LINK=2GB/s, tp_comm_overlap on ÷ off
           (lab04), with the cost model's prediction from the serial step's spans

Each comparison runs its two sides ALTERNATELY as separate processes (A, B, A, B, … after one untimed
warm-up pair), so that load on the machine hits both alike, and reports the median of the per-pair
ratios with their min–max, e.g. `mlp tp=2+SP engine/torch 0.74 (0.70–0.79)`. Each process reports the
median over its own steps of the slowest rank's step time (docs/performance.md has the definitions).
Run with Debian's python (python3-torch 1.13): /usr/bin/python3 bench/run_bench.py [--quick]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LAYOUTS = [("tp=1", 1, False), ("tp=2", 2, False), ("tp=2+SP", 2, True)]


def parse_result(out):
    """The fields of the last `RESULT <bench> k=v ...` line of out, numbers converted; None if absent."""
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        return None
    parts = lines[-1].split()
    fields = {"bench": parts[1]}
    for kv in parts[2:]:
        k, v = kv.split("=", 1)
        try:
            fields[k] = float(v) if re.search(r"[.eE]|nan|inf", v) else int(v)
        except ValueError:
            fields[k] = v
    return fields


def run(cmd, timeout):
    """Runs cmd (one OpenBLAS thread per process) and returns its RESULT fields; raises on failure."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", TPSP_COMM_FINGERPRINT="0")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    r = parse_result(p.stdout)
    if p.returncode != 0 or r is None:
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-8:])
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{tail}")
    return r


def summary(values, digits=2):
    """'median (min–max)' of values."""
    v = sorted(values)
    return f"{statistics.median(v):.{digits}f} ({v[0]:.{digits}f}–{v[-1]:.{digits}f})"


class Bench:
    """The comparisons, printed as they finish; every RESULT kept in self.records."""

    def __init__(self, a):
        self.a = a
        self.records = []  # every RESULT, with the comparison it belongs to (for --json)
        self.bin = os.path.join(a.build, "bench")

    def engine_cmd(self, bench, args):
        """build/bench/bench_<bench>_step with args (llama: bench_gpt_step --model llama)."""
        return [os.path.join(self.bin, f"bench_{'gpt' if bench == 'llama' else bench}_step")] + args

    def torch_cmd(self, bench, args):
        """The PyTorch peer of bench with the same args, run by a.python."""
        script = {"mlp": "tp_mlp_step.py", "gpt": "gpt_step.py", "llama": "llama_step.py"}[bench]
        return [self.a.python, os.path.join(HERE, "peers", script)] + args

    def pairs(self, name, cmd_a, cmd_b):
        """One untimed warm-up pair, then a.pairs alternating pairs; returns the lists of RESULTs."""
        ra, rb = [], []
        for i in range(self.a.pairs + 1):
            x = run(cmd_a, self.a.timeout)
            y = run(cmd_b, self.a.timeout)
            if i == 0:
                continue  # warm-up: page cache, CPU frequency, torch's first import
            ra.append(x)
            rb.append(y)
            self.records += [dict(x, comparison=name, pair=i), dict(y, comparison=name, pair=i)]
        return ra, rb

    def step_args(self, bench, tp, sp, extra=()):
        """The flags both sides of bench take: layout, shapes, step counts."""
        a = self.a
        args = ["--tp", str(tp), "--steps", str(a.steps), "--warmup", str(a.warmup)]
        args += ["--sp"] if sp else []
        if bench == "mlp":
            args += ["--seq", str(a.seq), "--batch", str(a.batch), "--hidden", str(a.hidden)]
        else:
            args += ["--seq", str(a.gpt_seq), "--batch", str(a.batch), "--hidden", str(a.gpt_hidden),
                     "--heads", str(a.gpt_heads), "--layers", str(a.gpt_layers), "--vocab", str(a.gpt_vocab)]
        if bench == "llama":  # GQA with heads/2 groups: whole groups per rank at tp = 1 and 2
            args += ["--model", "llama", "--query-groups", str(a.gpt_heads // 2)]
        return args + list(extra)

    def engine_vs_torch(self, bench):
        """Per layout: engine/torch, both step times, both gemm/step, the engine's span shares."""
        a = self.a
        for label, tp, sp in LAYOUTS:
            args = self.step_args(bench, tp, sp)
            e_cmd = self.engine_cmd(bench, args + ["--span-steps", str(a.span_steps)])
            if a.torch:
                er, tr = self.pairs(f"{bench} {label}", e_cmd, self.torch_cmd(bench, args))
            else:
                er, tr = [run(e_cmd, a.timeout) for _ in range(a.pairs + 1)][1:], []  # first: warm-up
            p = f"{bench} {label}"
            if tr:
                print(f"{p} engine/torch {summary([e['step_s'] / t['step_s'] for e, t in zip(er, tr)])}")
            torch_step = f"  torch {summary([t['step_s'] for t in tr], 4)} s" if tr else ""
            print(f"{p} step engine {summary([e['step_s'] for e in er], 4)} s{torch_step}")
            torch_gemm = f"  torch {summary([t['gemm_frac'] for t in tr])}" if tr else ""
            print(f"{p} gemm/step engine {summary([e['gemm_frac'] for e in er])}{torch_gemm}")
            # Shares of the traced steps (compute spans on), each over that same step's time.
            kinds = ["gemm", "attention", "comm"] if bench in ("gpt", "llama") else ["gemm", "comm"]
            spans = "  ".join(f"span_{k}/step {summary([e[f'span_{k}_s'] / e['span_step_s'] for e in er])}"
                              for k in kinds)
            print(f"{p} engine {spans}", flush=True)

    def scaling(self):
        """Engine MLP step at tp=2 over tp=1, alternating pairs, at each hidden size."""
        a = self.a
        for h in a.scaling_hidden:
            base = ["--seq", str(a.seq), "--batch", str(a.batch), "--hidden", str(h), "--steps", str(a.steps),
                    "--warmup", str(a.warmup), "--no-gemm", "--span-steps", "0"]
            one, two = self.pairs(f"scaling h={h}", self.engine_cmd("mlp", ["--tp", "1"] + base),
                                  self.engine_cmd("mlp", ["--tp", "2"] + base))
            ratio = summary([y["step_s"] / x["step_s"] for x, y in zip(one, two)])
            print(f"mlp h={h} tp=2/tp=1 engine {ratio}  (tp=1 {summary([x['step_s'] for x in one], 4)} s)",
                  flush=True)

    def overlap(self):
        """Overlapped ÷ serial step time of a TP+SP linear pair at 2 GB/s emulated (both modes alternate
        inside each process), with the prediction T_serial − min(T_comm, T_gemm) of lesson 04."""
        a = self.a
        cmd = [os.path.join(self.bin, "bench_overlap"), "--tp", "2", "--link", "2GB/s", "--steps",
               str(max(a.steps, 3)), "--warmup", str(a.warmup), "--span-steps", str(max(1, a.span_steps))]
        if a.quick:
            cmd += ["--seq", "256", "--hidden", "512", "--ffn", "128"]
        rs = [run(cmd, a.timeout) for _ in range(max(1, a.pairs // 2) + 1)][1:]  # first: warm-up
        self.records += [dict(r, comparison="overlap", pair=i + 1) for i, r in enumerate(rs)]
        r0 = rs[0]
        print(f"overlap tp=2+SP 2GB/s overlapped/serial {summary([r['ratio'] for r in rs])}  predicted "
              f"{summary([r['predicted'] for r in rs])}  (serial {summary([r['serial_s'] for r in rs], 4)} s; "
              f"s={r0['s']} b={r0['b']} h={r0['h']} ffn={r0['ffn']})", flush=True)

    def collectives(self):
        """busbw of each collective / raw Gloo ring all-reduce busbw at 16 and 64 MiB (the 'gloo' column
        of bench_collectives), median (min–max) over max(1, pairs // 2) runs (each its own median of 5
        rounds)."""
        sizes = [16 << 20, 64 << 20] if not self.a.quick else [1 << 20, 4 << 20]
        cmd = [os.path.join(self.bin, "bench_collectives"), "-b", str(sizes[0]), "-e", str(sizes[-1]),
               "-f", "4", "--ops", "all_reduce", "all_gather", "reduce_scatter"]
        ratio, busbw = {}, {}
        for _ in range(max(1, self.a.pairs // 2)):
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.a.timeout,
                               env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
            if p.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
            op = None
            for ln in p.stdout.splitlines():
                m = re.match(r"# (\w+)$", ln)
                if m:
                    op = m.group(1)
                cols = ln.split()
                if op and len(cols) == 9 and cols[0].isdigit():
                    key = (op, int(cols[0]))
                    ratio.setdefault(key, []).append(float(cols[7]))
                    busbw.setdefault(key, []).append(float(cols[5]))
        for (op, size), r in ratio.items():
            bw = summary(busbw[(op, size)], 3)
            print(f"busbw {op} {size >> 20}MiB engine/gloo {summary(r)}  (busbw {bw} GB/s)")


def main():
    """Parses the flags, checks for torch, runs the parts asked for; exit status 1 if a run failed."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="CMake build directory")
    p.add_argument("--python", default="/usr/bin/python3", help="python with torch for the peers")
    p.add_argument("--quick", action="store_true", help="smoke run: 2 pairs, small shapes")
    p.add_argument("--pairs", type=int,
                   help="alternating pairs per comparison after a warm-up pair (7; --quick 2)")
    p.add_argument("--steps", type=int, help="timed steps per process (4; --quick 2)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps per process")
    p.add_argument("--span-steps", type=int, help="engine steps with compute spans on (2; --quick 1)")
    p.add_argument("--only", default="mlp,gpt,llama,scaling,collectives,overlap",
                   help="comma-separated parts to run")
    p.add_argument("--json", help="write every RESULT (with its comparison and pair) to this file")
    p.add_argument("--timeout", type=float, default=900, help="seconds per process")
    a = p.parse_args()
    a.seq, a.batch, a.hidden = 512, 1, 1024
    a.gpt_seq, a.gpt_hidden, a.gpt_heads, a.gpt_layers, a.gpt_vocab = 512, 512, 8, 2, 8192
    a.scaling_hidden = [512, 1024, 2048]
    for k, full, quick in (("pairs", 7, 2), ("steps", 4, 2), ("span_steps", 2, 1)):
        if getattr(a, k) is None:
            setattr(a, k, quick if a.quick else full)
    if a.quick:
        a.seq, a.hidden = 128, 256
        a.gpt_seq, a.gpt_hidden, a.gpt_heads, a.gpt_layers, a.gpt_vocab = 128, 128, 4, 1, 1024
        a.scaling_hidden = [128, 256]
    t = subprocess.run([a.python, "-c", "import torch"], capture_output=True, text=True)
    a.torch = t.returncode == 0
    parts = a.only.split(",")
    known = ("mlp", "gpt", "llama", "scaling", "collectives", "overlap")
    if any(x not in known for x in parts):
        p.error(f"--only takes a comma-separated subset of {','.join(known)}")
    print(f"# run_bench: {os.cpu_count()} cores, {a.pairs} pairs after a warm-up pair, {a.steps} steps per "
          f"process; mlp s={a.seq} b={a.batch} h={a.hidden} ffn=4h; gpt L={a.gpt_layers} h={a.gpt_hidden} "
          f"heads={a.gpt_heads} s={a.gpt_seq} V={a.gpt_vocab}; {time.strftime('%Y-%m-%d %H:%M')}, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    t0 = time.time()
    if not a.torch and ("mlp" in parts or "gpt" in parts or "llama" in parts):
        print(f"torch: not importable by {a.python} (python3-torch missing?): engine-only figures below")
    b = Bench(a)
    try:
        for part in parts:
            {"mlp": lambda: b.engine_vs_torch("mlp"), "gpt": lambda: b.engine_vs_torch("gpt"),
             "llama": lambda: b.engine_vs_torch("llama"),
             "scaling": b.scaling, "collectives": b.collectives, "overlap": b.overlap}[part]()
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"run_bench: {e}", file=sys.stderr)
        return 1
    finally:
        print(f"# run_bench: {(time.time() - t0) / 60:.1f} min, load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} (1, 5, 15 min: other work on the machine)")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(b.records, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
