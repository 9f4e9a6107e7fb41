#!/usr/bin/env bash
# Bad GPU launches: more ranks on a node than GPUs exits 2 with one line; a stalled rank makes
# its NCCL peers abort with the timeout message instead of hanging. Skips (77) without 2 GPUs.
# The stall comes from trident_test's fault hook (TRIDENT_TEST_STALL).
#   launch_checks.sh TRIDENT TRIDENT_TEST REPO_ROOT MPIRUN ARGS...
set -uo pipefail
trident=$1 trident_test=$2 root=$3
shift 3
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if (( gpus < 2 )); then echo "no GPU: CUDA tests skipped (launch checks need 2 GPUs, found $gpus)"; exit 77; fi
export NCCL_NVLS_ENABLE=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
common=(--config "$root/inputs/models/tiny.cfg" --data.train "$root/data/fortunes_byte" --train.steps 10
        --model.seq_len 64 --train.micro_batch_size 2 --train.global_batch_size 4)

CUDA_VISIBLE_DEVICES=0 "$@" -np 2 -x CUDA_VISIBLE_DEVICES -x NCCL_NVLS_ENABLE "$trident" train "${common[@]}" \
  --backend cuda >"$out" 2>&1
rc=$?
cat "$out"
[[ $rc -eq 2 ]] || { echo "FAIL: 2 ranks on 1 GPU exited $rc, expected 2"; exit 1; }
grep -q "2 ranks on node .* but only 1 GPUs" "$out" || { echo "FAIL: no clear line"; exit 1; }
echo "ok: 2 ranks on 1 GPU rejected with exit 2"

TRIDENT_TEST_STALL=1:2 timeout 120 "$@" -np 2 -x TRIDENT_TEST_STALL -x NCCL_NVLS_ENABLE "$trident_test" train \
  "${common[@]}" --backend cuda --parallel.timeout_s 5 >"$out" 2>&1
rc=$?
cat "$out"
[[ $rc -ne 0 && $rc -ne 124 ]] || { echo "FAIL: stalled rank: exit $rc (0 = no abort, 124 = hung)"; exit 1; }
grep -q "timeout: .* did not finish within parallel.timeout_s = 5 s at step 2" "$out" ||
  { echo "FAIL: no timeout message naming rank, axis, operation and step"; exit 1; }
echo "ok: stalled rank made its peer abort with the timeout message"
