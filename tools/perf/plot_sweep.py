#!/usr/bin/python3
"""Plots the summary of `tools/perf/run.sh sweep` (CSV: layout, ranks, tokens_per_s, step_ms, efficiency) as bars of
tokens/s, step time and scaling efficiency per layout into one PNG (a summary without the
efficiency column, from an older sweep, gets two panels).

    tools/perf/plot_sweep.py runs/sweep/summary.csv -o runs/sweep/sweep.png
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")  # files only; no display needed on cluster nodes
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("summary", help="summary.csv written by tools/perf/run.sh sweep")
    parser.add_argument("-o", "--output", default="sweep.png", help="PNG to write (default: %(default)s)")
    args = parser.parse_args()

    with open(args.summary) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{args.summary}: no rows")
    names = [f"{r['layout']}\n{r['ranks']} ranks" for r in rows]
    panels = [("tokens_per_s", "tokens / s", "tab:blue"), ("step_ms", "step time (ms)", "tab:orange")]
    if "efficiency" in rows[0]:
        panels.append(("efficiency", "efficiency (tokens/s per rank\nvs the fewest-rank layout)", "tab:green"))
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(6, 1.4 * len(rows)), 3.5 * len(panels)), sharex=True)
    for ax, (key, label, color) in zip(axes, panels):
        ax.bar(names, [float(r[key]) for r in rows], color=color)
        ax.set_ylabel(label)
        ax.grid(True, axis="y", alpha=0.3)
    if "efficiency" in rows[0]:
        axes[-1].axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
    fig.suptitle("trident layout sweep")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"plot_sweep: {args.output} ({len(rows)} layouts, {len(panels)} panels)")


if __name__ == "__main__":
    main()
