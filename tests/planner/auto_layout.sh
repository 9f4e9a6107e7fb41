#!/usr/bin/env bash
# parallel.auto in `trident train` on 4 CPU ranks: the planner's layout is logged and trains.
# With its CPU constants the planner prefers pure data parallelism for the tiny model (no per-layer traffic).
#   auto_layout.sh TRIDENT REPO_ROOT MPIRUN ARGS... (ending in -np 4)
set -uo pipefail
trident=$1 root=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" "$trident" train --config "$root/inputs/models/tiny.cfg" --backend cpu --data.train "$root/data/fortunes_byte" \
  --parallel.auto true --parallel.tp 2 --train.steps 2 --model.seq_len 32 --log.every 1 >"$out" 2>&1
rc=$?
cat "$out"
[[ $rc -eq 0 ]] || { echo "FAIL: exit $rc"; exit 1; }
grep -q "^parallel.auto: dp=4 tp=1 pp=1 " "$out" || { echo "FAIL: no 'parallel.auto: dp=4 tp=1 pp=1' line"; exit 1; }
grep -q "^layout dp=4 tp=1 pp=1 " "$out" || { echo "FAIL: the run did not use the chosen layout"; exit 1; }
echo "ok: parallel.auto chose and trained dp=4"
