#!/usr/bin/python3
"""Draws which rows and columns of one transformer layer's weights and activations each TP rank holds,
from `tpsp-shards` (tools/shards/layout.h: the engine's own partition functions), for lessons 01–03:

  shard_layout_weights.png      the four weight matrices [out, in]: ColumnParallelLinear (QKV, fc1)
                                split on dim 0 (output features), RowParallelLinear (proj, fc2) on
                                dim 1 (input features)
  shard_layout_activations.png  the activations as [s, last dim] (b folded away), without and with
                                sequence parallelism: [s, b, h] replicated or [s/tp, b, h]; the
                                column-parallel outputs [s, b, 3h/tp], [s, b, ffn/tp]
  shard_layout_llama.png        the Llama block at tp=4 with 2 key/value groups: the fused QKV weight,
                                the fused [W_gate; W_up] split with stride 2 (two boxes per rank) and its
                                output [gate_r | up_r], q per rank, k and v shared by the two ranks of a
                                group

Usage: plot_shards.py TPSP_SHARDS OUT_DIR [--tp 2]
(Debian's /usr/bin/python3 with python3-matplotlib; `make docs` runs it.)
"""
import argparse
import json
import os
import re
import subprocess

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

RANK_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]
WEIGHTS = ["self_attention.linear_qkv.weight", "self_attention.linear_proj.weight", "mlp.linear_fc1.weight",
           "mlp.linear_fc2.weight"]
ACTIVATIONS = ["x", "qkv", "attention_out", "fc1", "y"]


LLAMA_WEIGHTS = ["self_attention.linear_qkv.weight", "mlp.linear_fc1.weight"]
LLAMA_ACTIVATIONS = ["q", "k", "v", "fc1"]


def layout(binary, tp, sp, extra=()):
    """tpsp-shards' JSON as a dict of tensors by name, and its config."""
    cmd = [binary, "--tp", str(tp), "--sp" if sp else "--no-sp", *extra]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({run.returncode}): {run.stderr}")
    doc = json.loads(run.stdout)
    return {t["name"]: t for t in doc["tensors"]}, doc["config"]


def span(a, b):
    return f"{a}–{b - 1}"


def draw(ax, t, row_dim, col_dim):
    """One tensor as a [rows, cols] box (rows downward), each rank's slice filled in its colour and
    labelled with its ranges; a replicated tensor is one box that every rank holds."""
    shape = t["global_shape"]
    rows, cols = shape[row_dim], shape[col_dim]
    dims = t["dims"]
    if t["placement"] == "Replicate":
        ax.add_patch(Rectangle((0, 0), cols, rows, facecolor="#bbbbbb", edgecolor="black", hatch="//"))
        ax.text(cols / 2, rows / 2, f"every rank:\nall {rows}×{cols}", ha="center", va="center", fontsize=8,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.9})
    else:
        split = int(re.search(r"\((\d+)", t["placement"]).group(1))
        holders = {}  # a box → the ranks holding it (several when sharded over groups)
        for r in t["ranks"]:
            for box in r["boxes"]:
                key = (box["start"][row_dim], box["stop"][row_dim], box["start"][col_dim], box["stop"][col_dim])
                holders.setdefault(key, []).append(r["rank"])
        for (r0, r1, c0, c1), ranks in holders.items():
            ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=RANK_COLORS[ranks[0] % 8],
                                   edgecolor="black", alpha=0.85))
            what = (f"{dims[row_dim]} {span(r0, r1)}" if split == row_dim else f"{dims[col_dim]} {span(c0, c1)}")
            who = "rank" + ("s " if len(ranks) > 1 else " ") + ",".join(str(k) for k in ranks)
            narrow = split == col_dim and (c1 - c0) / cols < 0.3  # a thin column: write along it
            ax.text((c0 + c1) / 2, (r0 + r1) / 2, f"{who}\n{what}", ha="center", va="center", fontsize=7,
                    color="white", rotation=90 if narrow else 0)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_xlabel(f"{dims[col_dim]} ({cols})", fontsize=8)
    ax.set_ylabel(f"{dims[row_dim]} ({rows})", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_aspect("auto")


def short(name):
    return name.split(".", 1)[-1] if name.startswith(("self_attention.", "mlp.")) else name


def plot_weights(tensors, cfg, dst):
    fig, axes = plt.subplots(1, len(WEIGHTS), figsize=(11, 3.2))
    for ax, name in zip(axes, WEIGHTS):
        t = tensors[name]
        draw(ax, t, 0, 1)
        ax.set_title(f"{short(name)} {t['global_shape']}\n{t['layer']}, {t['placement']}", fontsize=8)
    fig.suptitle(f"Weights per rank at tp={cfg['tp']} (h={cfg['h']}, ffn={cfg['ffn']}; stored [out, in])",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(dst, dpi=100)
    plt.close(fig)


def plot_activations(rows, cfg, dst):
    fig, axes = plt.subplots(len(rows), len(ACTIVATIONS), figsize=(11, 2.6 * len(rows)), squeeze=False)
    for axs, (label, tensors) in zip(axes, rows):
        for ax, name in zip(axs, ACTIVATIONS):
            t = tensors[name]
            draw(ax, t, 0, len(t["dims"]) - 1)
            ax.set_title(f"{label}: {name} {t['global_shape']}\n{t['placement']}", fontsize=8)
    fig.suptitle(f"Activations per rank at tp={cfg['tp']}, drawn as [s, last dim] (b={cfg['b']} folded away): "
                 "TP (top), TP+SP (bottom)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(dst, dpi=100)
    plt.close(fig)


def plot_llama(tensors, cfg, dst):
    names = LLAMA_WEIGHTS + LLAMA_ACTIVATIONS
    fig, axes = plt.subplots(1, len(names), figsize=(14, 3.4))
    for ax, name in zip(axes, names):
        t = tensors[name]
        weight = t["kind"] == "weight"
        draw(ax, t, 0, 1 if weight else len(t["dims"]) - 1)
        ax.set_title(f"{short(name)} {t['global_shape']}\n{t['placement']}", fontsize=8)
    fig.suptitle(f"Llama block at tp={cfg['tp']}, {cfg['query_groups']} key/value groups (h={cfg['h']}, "
                 f"{cfg['heads']} heads, ffn={cfg['ffn']}): weights [out, in], activations [s, last dim]",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(dst, dpi=100)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary", help="tpsp-shards")
    ap.add_argument("out_dir")
    ap.add_argument("--tp", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    no_sp, cfg = layout(a.binary, a.tp, False)
    sp, _ = layout(a.binary, a.tp, True)
    llama, llama_cfg = layout(a.binary, 4, False, ["--model", "llama", "--query-groups", "2"])
    for name, figure in [("shard_layout_weights.png", lambda d: plot_weights(no_sp, cfg, d)),
                         ("shard_layout_activations.png",
                          lambda d: plot_activations([("TP", no_sp), ("TP+SP", sp)], cfg, d)),
                         ("shard_layout_llama.png", lambda d: plot_llama(llama, llama_cfg, d))]:
        dst = os.path.join(a.out_dir, name)
        figure(dst)
        print(f"wrote {dst}")


if __name__ == "__main__":
    main()
