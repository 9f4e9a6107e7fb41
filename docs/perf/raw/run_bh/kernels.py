#!/usr/bin/env python3
"""Kernel-level view of an Nsight Systems report exported to SQLite: over the second half of the
run (steady state), how busy the GPU was (union of kernel intervals / window) and each kernel's
mean duration. Usage: kernels.py REPORT.sqlite [TOP]"""
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
names = dict(db.execute("SELECT id, value FROM StringIds"))
rows = db.execute("SELECT start, end, shortName, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start").fetchall()
rows = rows[len(rows) // 2:]
t0, t1 = rows[0][0], max(r[1] for r in rows)
busy, cur_s, cur_e = 0, None, None
for s, e, _, _ in rows:
    if cur_e is None or s > cur_e:
        if cur_e is not None:
            busy += cur_e - cur_s
        cur_s, cur_e = s, e
    else:
        cur_e = max(cur_e, e)
busy += cur_e - cur_s
print(f"window {(t1 - t0) / 1e6:.3f} ms, {len(rows)} kernels, GPU busy {100 * busy / (t1 - t0):.2f}%")
stats = {}
for s, e, n, _ in rows:
    c, tot = stats.get(names[n], (0, 0))
    stats[names[n]] = (c + 1, tot + e - s)
print(f"{'kernel':60s} {'calls':>7s} {'total ms':>10s} {'mean us':>10s}")
for name, (c, tot) in sorted(stats.items(), key=lambda kv: -kv[1][1])[:top]:
    print(f"{name[:60]:60s} {c:7d} {tot / 1e6:10.3f} {tot / c / 1e3:10.2f}")
