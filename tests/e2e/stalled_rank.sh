#!/usr/bin/env bash
# A rank that stops answering (test hooks) makes its peers abort with the timeout message
# within parallel.timeout_s instead of hanging the job: in a training step (the message names
# the operation), and in the middle of a checkpoint save (rank 0 names the stalled rank).
#   stalled_rank.sh TRIDENT REPO_ROOT MPIRUN ARGS...
set -uo pipefail
trident=$1 root=$2
shift 2
out=$(mktemp)
ckpt=$(mktemp -d)
trap 'rm -rf "$out" "$ckpt"' EXIT
run() {   # HOOK=VALUE, more trident flags: runs 2 ranks under timeout 120, sets rc and elapsed
  local start
  start=$(date +%s)
  env "$1" timeout 120 "${mpirun[@]}" -x "${1%%=*}" "$trident" train \
    --config "$root/inputs/models/tiny.cfg" --backend cpu --data.train "$root/data/fortunes_byte" \
    --model.seq_len 32 --model.n_layer 2 --train.micro_batch_size 2 --train.global_batch_size 4 --train.steps 10 \
    --parallel.timeout_s 3 "${@:2}" >"$out" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  cat "$out"
  if [[ $rc -eq 0 || $rc -eq 124 ]]; then echo "FAIL: exit status $rc (0 = no abort, 124 = hung)"; exit 1; fi
}
mpirun=("$@")

run TRIDENT_TEST_STALL=1:2
grep -q "timeout: dp all-reduce did not finish within parallel.timeout_s = 3 s at step 2" "$out" ||
  { echo "FAIL: no timeout message naming axis, operation and step"; exit 1; }
echo "ok: a rank stalled in a step: aborted with the timeout message after ${elapsed}s (status $rc)"

run TRIDENT_TEST_STALL_IN_SAVE=1:2 --checkpoint.dir "$ckpt" --checkpoint.every 2
grep -q "\[rank 0 .*timeout: checkpoint save of $ckpt/step_2.h5 (.*) did not finish within parallel.timeout_s = 3 s.*; rank(s) 1 did not arrive" "$out" ||
  { echo "FAIL: no timeout message from rank 0 naming the save and rank 1"; exit 1; }
echo "ok: a rank stalled in a save: rank 0 named it and aborted after ${elapsed}s (status $rc)"
