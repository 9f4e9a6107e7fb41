#!/usr/bin/env python3
"""Summarises traces of tools/perf/kernel_trace (TRACE.csv) over their second half (the steady state):
the share of the window in which some kernel ran, the idle gaps of the busiest stream, and each
kernel's calls and mean duration; given two traces, the kernels side by side.
usage: kernel_trace.py TRACE.csv [OTHER.csv] [--top N] [--gaps N] [--pairs N]"""
import argparse
import collections
import re


def short(name):
    """trident's kernels by their function name (the mangled name puts an anonymous namespace
    and the file first); others as they are."""
    m = re.match(r"_ZN7trident3gpu\d+_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]{8}(\d+)", name)
    if not m:
        return name
    rest = name[m.end():]
    length = int(m.group(1))
    return rest[:length] if len(rest) >= length else name


def load(path):
    kernels = []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("K,"):
                _, s, e, dev, stream, name = line.rstrip("\n").split(",", 5)
                kernels.append((int(s), int(e), int(dev), int(stream), name))
    kernels.sort()
    return kernels[len(kernels) // 2:]


def summary(path, kernels):
    t0, t1 = kernels[0][0], max(k[1] for k in kernels)
    busy, cur_s, cur_e = 0, None, None
    for s, e, *_ in kernels:
        if cur_e is None or s > cur_e:
            busy += (cur_e - cur_s) if cur_e is not None else 0
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    main = collections.Counter(k[3] for k in kernels).most_common(1)[0][0]
    on_main = [k for k in kernels if k[3] == main]
    gaps = [b[0] - a[1] for a, b in zip(on_main, on_main[1:]) if b[0] > a[1]]
    run = sum(e - s for s, e, *_ in on_main)
    print(f"{path}: window {(t1 - t0) / 1e6:.3f} ms, {len(kernels)} kernels, some kernel running "
          f"{100 * busy / (t1 - t0):.2f}%; stream {main}: {len(on_main)} kernels running {100 * run / (t1 - t0):.2f}%, "
          f"gaps {sum(gaps) / 1e6:.3f} ms ({sum(g > 10000 for g in gaps)} over 10 us: "
          f"{sum(g for g in gaps if g > 10000) / 1e6:.3f} ms)")
    stats = collections.defaultdict(lambda: [0, 0])
    for s, e, _, _, name in kernels:
        stats[name][0] += 1
        stats[name][1] += e - s
    # Which kernels the busiest stream's idle time came before (what the stream waited to start).
    before = collections.defaultdict(lambda: [0, 0])
    for a, b in zip(on_main, on_main[1:]):
        if b[0] > a[1]:
            before[b[4]][0] += 1
            before[b[4]][1] += b[0] - a[1]
    print("  idle before (kernel that followed the gap: gaps, total ms):")
    for name, (c, tot) in sorted(before.items(), key=lambda kv: -kv[1][1])[:args.gaps]:
        print(f"    {name[:70]:70s} {c:6d} {tot / 1e6:9.3f}")
    if args.pairs:
        # The same idle time by the pair of kernels around it, with its spread: a pair whose
        # shortest gaps (p10) exceed those of other pairs has work of another kind between them
        # (stream operations, events), not only waits for data.
        pairs = collections.defaultdict(list)
        for a, b in zip(on_main, on_main[1:]):
            pairs[(short(a[4]), short(b[4]))].append(max(0, b[0] - a[1]) / 1e3)
        print("  idle between (previous kernel -> next kernel: gaps, total ms, mean / p10 / p50 us):")
        for (a, b), g in sorted(pairs.items(), key=lambda kv: -sum(kv[1]))[:args.pairs]:
            g.sort()
            print(f"    {a[:40]:40s} -> {b[:40]:40s} {len(g):6d} {sum(g) / 1e3:9.3f} "
                  f"{sum(g) / len(g):7.2f} {g[len(g) // 10]:7.2f} {g[len(g) // 2]:7.2f}")
    return stats


ap = argparse.ArgumentParser()
ap.add_argument("traces", nargs="+")
ap.add_argument("--top", type=int, default=25)
ap.add_argument("--gaps", type=int, default=12, help="kernels listed with the idle time before them")
ap.add_argument("--pairs", type=int, default=0, help="kernel pairs listed with the idle time between them")
args = ap.parse_args()
all_stats = [summary(p, load(p)) for p in args.traces[:2]]
first = all_stats[0]
print(f"{'kernel':64s} " + " ".join(f"{'calls':>6s} {'mean us':>9s}" for _ in all_stats) +
      ("   ratio" if len(all_stats) > 1 else ""))
for name, (c, tot) in sorted(first.items(), key=lambda kv: -kv[1][1])[:args.top]:
    cols = [f"{c:6d} {tot / c / 1e3:9.2f}"]
    ratio = ""
    if len(all_stats) > 1:
        c2, tot2 = all_stats[1].get(name, (0, 0))
        cols.append(f"{c2:6d} {tot2 / c2 / 1e3 if c2 else 0:9.2f}")
        ratio = f"  {(tot2 / c2) / (tot / c):6.3f}" if c2 else ""
    print(f"{name[:64]:64s} " + " ".join(cols) + ratio)
