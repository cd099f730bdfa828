#!/usr/bin/python3
"""Draws the timeline of one step from the recorder's Chrome traces (engine/trace/recorder.h
chrome_trace(): one JSON per rank, "X" events, cat "compute" or "comm", ts/dur in µs since the Unix
epoch so the ranks line up): one lane per rank for compute and one for communication, one panel per
trace directory (e.g. serial and overlapped), on a shared time scale from each panel's first event.

Usage:
  plot_timeline.py OUT.png LABEL=DIR [LABEL=DIR ...]    DIR holds rank<r>.json (or rank<r>/trace.json)
  plot_timeline.py --each DIR [DIR ...]                 DIR/timeline.png for each DIR, labelled with its
                                                        name (./check --verbose: one run per DIR); traces
                                                        without events give a picture that says so

Spans that enclose others (layer.forward, layer.backward) are dashed frames on the compute lane.
Each panel's title gives the step's span and the overlap figure of every rank: communication time
covered by computation ÷ communication time (the definition of engine/trace/recorder.h).
Exits 1 naming the directory when it holds no trace (--each: after drawing the others). Needs
matplotlib (/usr/bin/python3).
"""
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"gemm": "#4c72b0", "attention": "#55a868", "send": "#dd8452", "recv": "#c44e52",
          "all_gather": "#8172b3", "reduce_scatter": "#937860", "all_reduce": "#da8bc3"}
# Compute spans that enclose others (engine/model/gpt.cpp): drawn as dashed frames with these labels.
BRACKETS = {"layer.forward": "layer forward", "layer.backward": "layer backward"}


def load(directory):
    """{rank: [events]} of the traces in directory; raises FileNotFoundError naming it when none."""
    files = sorted(glob.glob(os.path.join(directory, "rank*.json")) +
                   glob.glob(os.path.join(directory, "rank*", "trace.json")))
    if not files:
        raise FileNotFoundError(f"{directory}: no rank*.json or rank*/trace.json trace found")
    out = {}
    for f in files:
        events = [e for e in json.load(open(f))["traceEvents"] if e.get("ph") == "X"]
        for e in events:
            out.setdefault(e["pid"], []).append(e)
    return out


def union(intervals):
    merged = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def overlap(events):
    """|comm ∩ compute| / |comm| over the unions of the intervals (0 without communication); the
    enclosing spans of BRACKETS do not count as compute."""
    comm = union([(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "comm"])
    comp = union([(e["ts"], e["ts"] + e["dur"]) for e in events
                  if e.get("cat") == "compute" and kind(e) not in BRACKETS])  # a layer's frame is no compute
    total = sum(b - a for a, b in comm)
    covered = sum(max(0, min(b, d) - max(a, c)) for a, b in comm for c, d in comp)
    return covered / total if total > 0 else 0.0


def kind(e):
    return e["args"].get("op") or e["args"].get("name") or e["name"].split()[0]


def draw(ax, label, ranks):
    t0 = min(e["ts"] for evs in ranks.values() for e in evs)
    t1 = max(e["ts"] + e["dur"] for evs in ranks.values() for e in evs)
    lanes, figures = [], []
    for r in sorted(ranks):
        for lane, cat in ((f"rank {r} compute", "compute"), (f"rank {r} comm", "comm")):
            y = len(lanes)
            lanes.append(lane)
            for e in ranks[r]:
                if e.get("cat") != cat or kind(e) == "barrier":
                    continue
                if kind(e) in BRACKETS:  # a span around others (a whole layer): a dashed frame, labelled
                    ax.broken_barh([((e["ts"] - t0) / 1e3, e["dur"] / 1e3)], (y - 0.48, 0.96), facecolor="none",
                                   edgecolor="black", linestyle="--", linewidth=0.8, zorder=3)
                    ax.text((e["ts"] - t0 + e["dur"] / 2) / 1e3, y - 0.5, BRACKETS[kind(e)], ha="center",
                            va="bottom", fontsize=7)
                    continue
                ax.broken_barh([((e["ts"] - t0) / 1e3, e["dur"] / 1e3)], (y - 0.4, 0.8),
                               color=COLORS.get(kind(e), "#999999"), edgecolor="black", linewidth=0.3)
        figures.append(f"rank {r} {100 * overlap(ranks[r]):.0f}%")
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(lanes)
    ax.invert_yaxis()
    ax.set_title(f"{label}: {(t1 - t0) / 1e3:.1f} ms; communication covered by compute: " + ", ".join(figures),
                 fontsize=9)


def figure(out, panels):
    """Draws the panels [(label, {rank: [events]})] into out, one under the other, on one time scale."""
    lanes = sum(2 * len(r) for _, r in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 1.0 + 0.5 * lanes + 0.6 * len(panels)), squeeze=False)
    xmax = max((max(e["ts"] + e["dur"] for evs in r.values() for e in evs) -
                min(e["ts"] for evs in r.values() for e in evs)) / 1e3 for _, r in panels)
    for ax, (label, ranks) in zip(axes[:, 0], panels):
        draw(ax, label, ranks)
        ax.set_xlim(0, xmax * 1.02)
    axes[-1, 0].set_xlabel("ms from the first event of the panel")
    present = {kind(e) for _, r in panels for evs in r.values() for e in evs}
    handles = [matplotlib.patches.Patch(color=c, label=k) for k, c in COLORS.items() if k in present]
    if present & set(BRACKETS):
        handles.append(matplotlib.patches.Patch(facecolor="none", edgecolor="black", linestyle="--",
                                                label="one transformer layer"))
    fig.legend(handles=handles, loc="lower center", ncol=max(1, len(handles)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(out, dpi=90)
    plt.close(fig)
    print(f"wrote {out}")


def empty(out, label):
    """A picture that says the traces of `label` hold no event."""
    fig, ax = plt.subplots(figsize=(8, 1.2))
    ax.axis("off")
    ax.text(0.5, 0.5, f"{label}\nthe ranks recorded no computation and no communication", ha="center",
            va="center", fontsize=10)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    print(f"wrote {out} (no events)")


def each(dirs):
    """DIR/timeline.png for every DIR (one panel labelled with DIR's name); 1 if any DIR failed."""
    code = 0
    for d in dirs:
        try:
            label, ranks = os.path.basename(os.path.normpath(d)), load(d)
            if not ranks:  # e.g. a run that stopped at its first TODO: say so rather than leave no picture
                empty(os.path.join(d, "timeline.png"), label)
                continue
            figure(os.path.join(d, "timeline.png"), [(label, ranks)])
        except (FileNotFoundError, json.JSONDecodeError, KeyError, ValueError) as e:
            print(f"plot_timeline.py: {e}", file=sys.stderr)
            code = 1
    return code


def main(argv):
    if len(argv) >= 3 and argv[1] == "--each":
        return each(argv[2:])
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        print(__doc__, file=sys.stderr)
        return 2
    panels = [a.rsplit("=", 1) for a in argv[2:]]  # the last "=": labels may hold one ("tp=2")
    try:
        data = [(label, load(d)) for label, d in panels]
    except (FileNotFoundError, json.JSONDecodeError, KeyError) as e:
        print(f"plot_timeline.py: {e}", file=sys.stderr)
        return 1
    figure(argv[1], data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
