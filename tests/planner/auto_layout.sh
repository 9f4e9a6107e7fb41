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
# One head and 5 sequences on 4 ranks leave pp 4 only; the planner ranks zero_bubble first and the
# run trains with it.
"$@" "$trident" train --config "$root/inputs/models/tiny.cfg" --backend cpu --data.train "$root/data/fortunes_byte" \
  --parallel.auto true --model.n_head 1 --train.global_batch_size 5 --train.steps 1 --model.seq_len 32 >"$out" 2>&1
rc=$?
cat "$out"
[[ $rc -eq 0 ]] || { echo "FAIL: pp 4 under parallel.auto: exit $rc"; exit 1; }
grep -q "^layout dp=1 tp=1 pp=4 " "$out" || { echo "FAIL: parallel.auto did not train pp=4"; exit 1; }
grep -q "^parallel.auto: dp=1 tp=1 pp=4 zero=0 schedule=zero_bubble " "$out" ||
  { echo "FAIL: parallel.auto did not choose zero_bubble at pp=4"; exit 1; }
echo "ok: parallel.auto chose and trained dp=4, and pp=4 with zero_bubble"
