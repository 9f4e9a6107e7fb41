#!/usr/bin/python3
"""Plots the summary of `tools/perf/run.sh sweep` (CSV: layout, ranks, tokens_per_s, step_ms) as
bars of tokens/s and step time per layout into one PNG.

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
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(6, 1.4 * len(rows)), 7), sharex=True)
    top.bar(names, [float(r["tokens_per_s"]) for r in rows], color="tab:blue")
    top.set_ylabel("tokens / s")
    bottom.bar(names, [float(r["step_ms"]) for r in rows], color="tab:orange")
    bottom.set_ylabel("step time (ms)")
    for ax in (top, bottom):
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("trident layout sweep")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"plot_sweep: {args.output} ({len(rows)} layouts)")


if __name__ == "__main__":
    main()
