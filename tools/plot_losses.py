#!/usr/bin/python3
"""Draws the demo's loss curves (reference vs parallel) from losses.csv into a PNG.

Usage: plot_losses.py LOSSES_CSV OUT_PNG [LABEL]   (Debian's /usr/bin/python3 with python3-matplotlib)
LABEL names the parallel run in the legend (default "tensor + sequence parallel").
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src: str, dst: str, label: str = "tensor + sequence parallel") -> None:
    steps, ref, par = [], [], []
    with open(src, newline="") as f:
        for row in csv.DictReader(f):
            steps.append(int(row["step"]))
            ref.append(float(row["reference"]))
            par.append(float(row["parallel"]))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, ref, label="single-process reference", linewidth=2.5, alpha=0.6)
    ax.plot(steps, par, label=label, linestyle="--", linewidth=1.2)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss (nats/byte)")
    ax.set_title("tpsp demo: the parallel run is the same model")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(*sys.argv[1:])
