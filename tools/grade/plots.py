"""The class figures of ./grade (drawn by report.py; matplotlib with the Agg backend, /usr/bin/python3):

  scores.png     histogram of the submissions' total scores (points = scenarios passed in every layout)
  scenarios.png  heat map, one row per (lab, scenario) and one column per submission, each cell
                 pass / fail / not implemented / not graded, with a legend; sized for ~60 x ~30.

Importing this module imports matplotlib (report.py checks it is there first).
"""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import BoundaryNorm, ListedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

# One colour per cell verdict, in report.CELL_ORDER's order: pass, fail, not implemented, not graded.
COLORS = ["#2e7d32", "#c62828", "#f9a825", "#9e9e9e"]


def score_histogram(path, scores, max_score):
    """Writes the histogram of `scores` ({name: total points}) with one bar per point from 0 to
    `max_score` (bins of several points beyond 40; weighted scores fall in the bin of their nearest
    point) to `path` (PNG); returns `path`."""
    top = int(math.ceil(max_score))
    width = max(1, -(-(top + 1) // 40))  # ceil: at most ~40 bars
    edges = [b - 0.5 for b in range(0, top + width + 1, width)]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(list(scores.values()), bins=edges, color="#1565c0", edgecolor="white")
    ax.set_xlim(-0.5, edges[-1])  # the last bin whole (the full score sits in it)
    ax.set_xlabel(f"total score (of {max_score:g}: a scenario's points when it passed in every layout)")
    ax.set_ylabel("submissions")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title(f"Scores of {len(scores)} submissions")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def scenario_heatmap(path, rows, names, grid, order):
    """Writes the scenario x submission map to `path` (PNG); returns `path`.

    rows: [(lab, scenario id)] top to bottom; names: submissions left to right; grid: {name: {(lab,
    scenario): verdict}}; order: the verdicts in COLORS' order (a missing cell counts as the last).
    Labs are separated by a line; every row and column is labelled.
    """
    index = {v: i for i, v in enumerate(order)}
    values = [[index.get(grid.get(n, {}).get(r), len(order) - 1) for n in names] for r in rows]
    fig_w = min(40.0, 3.5 + 0.28 * max(len(names), 4))
    fig_h = min(60.0, 1.8 + 0.17 * max(len(rows), 4))
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    cmap = ListedColormap(COLORS[: len(order)])
    norm = BoundaryNorm([i - 0.5 for i in range(len(order) + 1)], cmap.N)
    ax.imshow(values, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([sc for _, sc in rows], fontsize=7)
    ax.set_xticks([x - 0.5 for x in range(1, len(names))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(rows))], minor=True)
    ax.grid(which="minor", color="white", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    for y in range(1, len(rows)):
        if rows[y][0] != rows[y - 1][0]:
            ax.axhline(y - 0.5, color="black", linewidth=1.2)
    ax.set_xlabel("submission")
    ax.set_title("Scenarios passed in every layout, per submission")
    ax.legend(handles=[Patch(color=c, label=v) for c, v in zip(COLORS, order)], loc="upper left",
              bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
