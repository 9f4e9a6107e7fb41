#!/usr/bin/env bash
# tools/perf/run.sh sweep on CPU ranks: two tiny layouts, three steps each, give summary.csv with a
# header and two rows of positive throughput and their scaling efficiency, and the sweep plot.
#   test_bench_sweep.sh TRIDENT REPO_ROOT MPIRUN [ARGS...]
set -euo pipefail
trident=$1 root=$2
shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$root/tools/perf/run.sh" sweep --trident "$trident" --steps 3 --out "$out" --mpirun "$*" 1:1:1 2:2:1 -- --backend cpu \
  --data.train "$root/data/fortunes_byte" --model.seq_len 32 --train.global_batch_size 8 --train.micro_batch_size 2 \
  | tee "$out/sweep.out"
/usr/bin/python3 - "$out/summary.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["layout"] for r in rows] == ["dp1-tp1-pp1-z0", "dp1-tp2-pp1-z0"], rows
assert [r["ranks"] for r in rows] == ["1", "2"], rows
assert all(float(r["tokens_per_s"]) > 0 and float(r["step_ms"]) > 0 for r in rows), rows
assert rows[0]["efficiency"] == "1.000", f"the 1-rank baseline's efficiency: {rows[0]['efficiency']}"
want = float(rows[1]["tokens_per_s"]) / 2 / float(rows[0]["tokens_per_s"])
assert abs(float(rows[1]["efficiency"]) - want) < 1e-3, f"efficiency {rows[1]['efficiency']}, expected {want:.3f}"
print("ok: summary.csv has the two layouts and their efficiency")
PY
[[ -s $out/sweep.png ]] || { echo "FAIL: no sweep.png"; exit 1; }
grep -q "plot_sweep: .* (2 layouts, 3 panels)" "$out/sweep.out" || { echo "FAIL: the plot lacks the efficiency panel"; exit 1; }
