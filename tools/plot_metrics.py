#!/usr/bin/python3
"""Plots loss (and validation loss), learning rate, gradient norm, tokens/s, MFU and peak memory per
step from trident metrics files (JSON Lines, one object per optimizer step, written by log.metrics)
into one PNG; several runs overlay, each labelled by its file name. Rows without a value (null,
or files written before a field existed) leave a gap.

    tools/plot_metrics.py runs/a/metrics.jsonl runs/b/metrics.jsonl -o compare.png
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only; no display needed on cluster nodes
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

# (metrics key, panel title, log scale): a log scale keeps one gradient spike from flattening the rest.
REQUIRED = [
    ("loss", "loss (mean token cross-entropy)", False),
    ("lr", "learning rate", False),
    ("grad_norm", "gradient norm (before clipping)", True),
    ("tokens_per_s", "tokens / s", False),
]
OPTIONAL = [
    ("mfu", "MFU (model FLOPs utilisation)", False),
    ("peak_mem_gib", "peak memory, highest rank (GiB)", False),
]
PANELS = REQUIRED + OPTIONAL


def read_metrics(path):
    """Rows by step. A run resumed from a checkpoint appends steps it had already logged; the
    later row of a step wins, so the plot shows the run that continued."""
    by_step = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{number}: not JSON: {e}")
            missing = [key for key, _, _ in REQUIRED if key not in row] + ([] if "step" in row else ["step"])
            if missing:
                sys.exit(f"{path}:{number}: no {', '.join(missing)} (not a trident metrics file?)")
            by_step[row["step"]] = row
    if not by_step:
        sys.exit(f"{path}: no metrics rows")
    return [by_step[s] for s in sorted(by_step)]


def labels(paths):
    """File names; parent/name where two runs share a file name (runs/*/metrics.jsonl)."""
    names = [os.path.basename(p) for p in paths]
    if len(set(names)) == len(names):
        return names
    return [os.path.join(os.path.basename(os.path.dirname(os.path.abspath(p))), os.path.basename(p)) for p in paths]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("metrics", nargs="+", help="metrics JSONL files (log.metrics)")
    parser.add_argument("-o", "--output", default="metrics.png", help="PNG to write (default: %(default)s)")
    parser.add_argument("--title", default="", help="figure title")
    args = parser.parse_args()

    fig, axes = plt.subplots(3, 2, figsize=(12, 11), sharex=True)
    points = {}  # series -> points drawn, printed so that a caller can see what was plotted
    for path, label in zip(args.metrics, labels(args.metrics)):
        rows = read_metrics(path)
        for ax, (key, _, _) in zip(axes.flat, PANELS):
            xy = [(r["step"], r[key]) for r in rows if r.get(key) is not None]  # step: updates done
            line = ax.plot([x for x, _ in xy], [y for _, y in xy], label=label, linewidth=1.2)
            points[key] = points.get(key, 0) + len(xy)
            if key == "loss":
                val = [(r["step"], r["val_loss"]) for r in rows if r.get("val_loss") is not None]
                ax.plot([x for x, _ in val], [y for _, y in val], "o--", color=line[0].get_color(), markersize=4,
                        label=f"{label} (validation)")
                points["val_loss"] = points.get("val_loss", 0) + len(val)
    for ax, (_, title, log) in zip(axes.flat, PANELS):
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("step")
    axes[0][0].legend(fontsize="small")
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"plot_metrics: {args.output} ({len(args.metrics)} run{'s' if len(args.metrics) > 1 else ''}; points: "
          + ", ".join(f"{k} {n}" for k, n in points.items()) + ")")


if __name__ == "__main__":
    main()
