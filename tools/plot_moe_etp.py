#!/usr/bin/python3
"""Draws lesson 06's figure from `tpsp-capacity --json` (engine/moe/comm_volume.h's closed forms):

  moe_etp_bytes.png  bytes one rank sends for one MoE layer (forward; backward as much again), split by
                     collective, at a fixed expert world of 8 ranks: EP=8 ETP=1, EP=4 ETP=2, EP=2 ETP=4,
                     EP=1 ETP=8 (the preset moe-etp: h=4096, 8 experts, top-2, expert ffn 1408, 256 tokens
                     per rank, bf16), each bar labelled with the fc1 GEMM a rank runs per expert.

Usage: plot_moe_etp.py TPSP_CAPACITY OUT_DIR
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
WORLD = 8
KINDS = [("dispatch", "dispatch all-to-all"), ("combine", "combine all-to-all"),
         ("etp_all_gather", "ETP all-gather"), ("etp_reduce_scatter", "ETP reduce-scatter")]


def layout(binary, etp):
    """The MoE section's first layout at EP = WORLD/etp, ETP = etp."""
    cmd = [binary, "--model", "moe-etp", "--ep", str(WORLD // etp), "--etp", str(etp), "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({run.returncode}): {run.stderr}")
    return json.loads(run.stdout)["moe"]["layouts"][0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capacity")
    ap.add_argument("out_dir")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    etps = [1, 2, 4, 8]
    rows = [layout(args.capacity, e) for e in etps]
    fig, ax = plt.subplots(figsize=(7, 4))
    names = [f"EP={r['ep']}, ETP={r['etp']}" for r in rows]
    bottom = [0.0] * len(rows)
    for key, label in KINDS:
        vals = [r[key] / MIB for r in rows]
        ax.bar(names, vals, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, vals)]
    for i, r in enumerate(rows):
        m, n, k = r["gemms"][0]
        ax.annotate(f"{len(r['gemms']) // 2} × fc1 [{m}, {n}, {k}]", (i, bottom[i]), ha="center",
                    va="bottom", fontsize=8)
    ax.set_ylabel("MiB one rank sends, one MoE layer forward")
    ax.set_title("one MoE layer at 8 ranks: same FLOPs, narrower GEMMs, more bytes", fontsize=10)
    ax.set_ylim(0, max(bottom) * 1.15)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path = os.path.join(args.out_dir, "moe_etp_bytes.png")
    fig.savefig(path, dpi=120)
    print(path)


if __name__ == "__main__":
    main()
