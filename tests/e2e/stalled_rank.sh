#!/usr/bin/env bash
# A rank that stops answering (test hook) makes its peers abort with the timeout message
# within parallel.timeout_s instead of hanging the job.
#   stalled_rank.sh TRIDENT REPO_ROOT MPIRUN ARGS...
set -uo pipefail
trident=$1 root=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
TRIDENT_TEST_STALL=1:2 timeout 120 "$@" -x TRIDENT_TEST_STALL "$trident" train \
  --config "$root/inputs/models/tiny.cfg" --backend cpu --data.train "$root/data/fortunes_byte" \
  --model.seq_len 32 --model.n_layer 2 --train.micro_batch_size 2 --train.global_batch_size 4 --train.steps 10 \
  --parallel.timeout_s 3 >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
if [[ $rc -eq 0 || $rc -eq 124 ]]; then echo "FAIL: exit status $rc (0 = no abort, 124 = hung)"; exit 1; fi
grep -q "timeout: dp all-reduce did not finish within parallel.timeout_s = 3 s at step 2" "$out" ||
  { echo "FAIL: no timeout message naming axis, operation and step"; exit 1; }
echo "ok: aborted with the timeout message after ${elapsed}s (status $rc)"
