#!/usr/bin/env bash
# Runs `trident train` for a few steps in each of several layouts and world sizes, then writes
# OUT/summary.csv (layout, ranks, tokens/s, step ms: means over the steps after the first, which
# pays for warm-up; efficiency: tokens/s per rank over that of the first layout with the fewest
# ranks) and OUT/sweep.png (plot_sweep.py). A benchmark, not a test; started as
# `tools/perf/run.sh sweep ...`.
#
#   tools/perf/run.sh sweep [options] LAYOUT... [-- TRIDENT FLAGS...]
#     LAYOUT           RANKS:TP:PP[:ZERO], e.g. 8:2:2:1 (dp = RANKS / (TP*PP); ZERO 0, 1 or 2)
#     --trident BIN    trident binary (default: build/trident)
#     --config FILE    config file, repeatable (default: inputs/models/tiny.cfg)
#     --steps N        steps per layout (default: 10)
#     --out DIR        output directory (default: runs/sweep)
#     --mpirun "CMD"   launcher and its flags (default: "mpirun"); ranks are added with -np
#   e.g. tools/perf/run.sh sweep --steps 20 4:1:1 4:2:1 4:1:2:1 -- --backend cpu
# Each layout's log and metrics stay in OUT/<layout>.log and OUT/<layout>.jsonl.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
trident=$root/build/trident steps=10 out=runs/sweep mpirun=mpirun
configs=() layouts=() extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --trident) trident=$2; shift 2 ;;
    --config) configs+=(--config "$2"); shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --mpirun) mpirun=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "sweep: unknown option $1 (see the usage at the top of the script)" >&2; exit 2 ;;
    *) layouts+=("$1"); shift ;;
  esac
done
[[ ${#configs[@]} -gt 0 ]] || configs=(--config "$root/inputs/models/tiny.cfg")
[[ ${#layouts[@]} -gt 0 ]] || { echo "sweep: give at least one layout RANKS:TP:PP[:ZERO]" >&2; exit 2; }
read -r -a launcher <<<"$mpirun"
mkdir -p "$out"
summary=$out/summary.csv
echo "layout,ranks,tokens_per_s,step_ms" >"$summary"

failed=0
for spec in "${layouts[@]}"; do
  IFS=: read -r ranks tp pp zero <<<"$spec"
  zero=${zero:-0}
  if ! [[ $ranks =~ ^[0-9]+$ && $tp =~ ^[0-9]+$ && $pp =~ ^[0-9]+$ && $zero =~ ^[012]$ ]] || ((ranks % (tp * pp))); then
    echo "sweep: layout '$spec' is not RANKS:TP:PP[:ZERO] with TP*PP dividing RANKS" >&2
    exit 2
  fi
  name=dp$((ranks / (tp * pp)))-tp$tp-pp$pp-z$zero
  rm -f "$out/$name.jsonl"   # the metrics writer appends
  echo "sweep: $name on $ranks ranks"
  if ! "${launcher[@]}" -np "$ranks" "$trident" train "${configs[@]}" --parallel.tp "$tp" --parallel.pp "$pp" \
      --parallel.zero "$zero" --train.steps "$steps" --log.every "$steps" --log.metrics "$out/$name.jsonl" \
      "${extra[@]}" >"$out/$name.log" 2>&1; then
    echo "sweep: $name failed; last lines of $out/$name.log:" >&2
    tail -5 "$out/$name.log" >&2
    failed=1
    continue
  fi
  /usr/bin/python3 - "$out/$name.jsonl" "$name" "$ranks" >>"$summary" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
timed = rows[1:] or rows
mean = lambda key: sum(r[key] for r in timed) / len(timed)
print(f"{sys.argv[2]},{sys.argv[3]},{mean('tokens_per_s'):.1f},{mean('step_ms'):.3f}")
PY
done
# Scaling efficiency: tokens/s per rank against the first layout with the fewest ranks.
/usr/bin/python3 - "$summary" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
if rows:
    base = min(rows, key=lambda r: int(r["ranks"]))
    per_rank = float(base["tokens_per_s"]) / int(base["ranks"])
    with open(sys.argv[1], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) + ["efficiency"])
        w.writeheader()
        for r in rows:
            r["efficiency"] = f"{float(r['tokens_per_s']) / int(r['ranks']) / per_rank:.3f}"
            w.writerow(r)
PY
column -s, -t "$summary" 2>/dev/null || cat "$summary"
/usr/bin/python3 "$root/tools/perf/plot_sweep.py" "$summary" -o "$out/sweep.png"
exit $failed
