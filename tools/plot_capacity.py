#!/usr/bin/python3
"""Draws two figures of lesson 03 from `tpsp-capacity --json` (the engine's own accounting):

  activation_memory_vs_tp.png  activation bytes one layer keeps for backward, per rank, against tp,
                               with and without sequence parallelism
  layer_comm_bytes_vs_tp.png   bytes one rank sends for one layer (forward, backward) against tp:
                               all-reduces without SP, all-gathers + reduce-scatters with SP

Usage: plot_capacity.py TPSP_CAPACITY OUT_DIR [--model llama-70b]
(Debian's /usr/bin/python3 with python3-matplotlib; `make docs` runs it.)
"""
import argparse
import json
import os
import subprocess

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 1024 * 1024
TPS = [1, 2, 4, 8, 16]


def capacity(binary, model, tp, sp):
    """One report of tpsp-capacity as a dict; None if the engine refuses that layout (exit 2)."""
    cmd = [binary, "--model", model, "--tp", str(tp), "--sp" if sp else "--no-sp", "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode == 2:
        return None
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({run.returncode}): {run.stderr}")
    return json.loads(run.stdout)


def phase_bytes(report, phase):
    """Bytes one rank sends in `phase` for one layer, per kind of call: {kind: bytes}, where kind is the
    op, or "all_gather (wgrad)" for the re-gather of a column-parallel input in backward."""
    out = {}
    for c in report["layer_calls"]:
        if c["phase"] == phase:
            kind = "all_gather (wgrad)" if c["label"].endswith(".ag_wgrad") else c["op"]
            out[kind] = out.get(kind, 0) + c["wire_bytes"]
    return out


def plot_memory(reports, title, dst):
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for sp, style, label in [(False, "o-", "TP only"), (True, "s-", "TP + SP")]:
        pts = [(tp, r["activations_per_layer"]["selected"]["total"] / MIB)
               for (tp, s), r in sorted(reports.items()) if s == sp and r]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
        for tp, mib in pts:
            if tp > 1:
                ax.annotate(f"{mib:.0f}", (tp, mib), textcoords="offset points", xytext=(4, -12 if sp else 6),
                            fontsize=8)
    base = reports[(1, False)]["activations_per_layer"]["selected"]["total"] / MIB
    ax.plot(TPS, [base / t for t in TPS], ":", color="gray", label="tp=1 divided by tp")
    ax.set_xscale("log", base=2)
    ax.set_xticks(TPS, [str(t) for t in TPS])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("tensor-parallel size tp")
    ax.set_ylabel("MiB per rank, one layer")
    ax.set_title(f"Activations one layer keeps for backward\n{title}", fontsize=10)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(dst, dpi=80)
    plt.close(fig)


def plot_comm(reports, title, dst):
    tps = [t for t in TPS if t > 1 and reports.get((t, True))]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.8), sharey=True)
    colors = {"all_reduce": "tab:blue", "all_gather": "tab:orange", "reduce_scatter": "tab:green",
              "all_gather (wgrad)": "tab:red"}
    width = 0.38
    for ax, phase in zip(axes, ["forward", "backward"]):
        for k, sp in enumerate([False, True]):
            bottoms = [0.0] * len(tps)
            for op in ["all_reduce", "reduce_scatter", "all_gather", "all_gather (wgrad)"]:
                vals = [phase_bytes(reports[(t, sp)], phase).get(op, 0) / MIB for t in tps]
                if not any(vals):
                    continue
                xs = [i + (k - 0.5) * width for i in range(len(tps))]
                lbl = f"{op} ({'SP' if sp else 'TP'})"
                ax.bar(xs, vals, width, bottom=bottoms, color=colors[op], label=lbl,
                       hatch="//" if sp else None, edgecolor="white")
                bottoms = [b + v for b, v in zip(bottoms, vals)]
        ax.set_xticks(range(len(tps)), [f"tp={t}\nTP | SP" for t in tps])
        ax.set_title(phase)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("MiB sent per rank, one layer")
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    axes[1].legend(handles, labels, fontsize=8, loc="upper left")
    fig.suptitle(f"Communication of one layer (ring: all-reduce = reduce-scatter + all-gather)\n{title}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(dst, dpi=80)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("binary")
    p.add_argument("out_dir")
    p.add_argument("--model", default="llama-70b")
    a = p.parse_args()
    reports = {(tp, sp): capacity(a.binary, a.model, tp, sp) for tp in TPS for sp in [False, True]}
    r = reports[(1, False)]
    c = r["config"]
    title = (f"{a.model}: h={c['hidden']} ffn={c['ffn']} heads={c['heads']} s={c['seq']} b={c['batch']} "
             f"{c['dtype']} (tpsp-capacity)")
    os.makedirs(a.out_dir, exist_ok=True)
    for name, fn in [("activation_memory_vs_tp.png", plot_memory), ("layer_comm_bytes_vs_tp.png", plot_comm)]:
        dst = os.path.join(a.out_dir, name)
        fn(reports, title, dst)
        print(f"{dst}: {os.path.getsize(dst)} bytes")


if __name__ == "__main__":
    main()
