#!/usr/bin/env bash
# e2e: updates with a NaN gradient on one rank (TRIDENT_TEST_NAN_GRAD, from update 5 on) are
# skipped, logged and counted; train.max_skipped = 3 of them in a row stop the run with status 1, a
# clear message and a checkpoint whose weights are those after update 4 (the last applied).
#   skipped_steps.sh TRIDENT REPO_ROOT MPIRUN [MPIRUN ARGS...]
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
args=(--config "$root/inputs/models/tiny.cfg" --backend cpu --data.train "$data" --model.n_layer 2
      --model.seq_len 16 --train.micro_batch_size 2 --train.global_batch_size 4 --log.every 1)
status=0
"$@" -np 2 -x TRIDENT_TEST_NAN_GRAD=1:5:100 "$trident" train "${args[@]}" --train.steps 12 --train.max_skipped 3 \
  --checkpoint.dir "$out/a" --log.metrics "$out/a.jsonl" >"$out/a.log" 2>&1 || status=$?
[[ $status == 1 ]] || { cat "$out/a.log"; echo "FAIL: exit status $status, expected 1"; exit 1; }
grep -q "step 5: update skipped: non-finite gradient norm" "$out/a.log" || { cat "$out/a.log"; echo "FAIL: no skip line"; exit 1; }
grep -q "stopping: 3 updates in a row were skipped (train.max_skipped = 3); the last good state is saved as step 7" \
  "$out/a.log" || { cat "$out/a.log"; echo "FAIL: no stop message"; exit 1; }
/usr/bin/python3 - "$out/a.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
got = [(r["step"], r["skipped"], r["skipped_steps"]) for r in rows]
want = [(1, False, 0), (2, False, 0), (3, False, 0), (4, False, 0), (5, True, 1), (6, True, 2), (7, True, 3)]
assert got == want, f"(step, skipped, skipped_steps): {got}"
assert all("non-finite" in r["skip_reason"] for r in rows if r["skipped"])
PY
# The same run stopped after update 4: its weights must be the stopped run's.
"$@" -np 2 "$trident" train "${args[@]}" --train.steps 4 --checkpoint.dir "$out/b" >"$out/b.log" 2>&1 ||
  { cat "$out/b.log"; exit 1; }
h5diff -q "$out/a/step_7.h5" "$out/b/step_4.h5" /model /model ||
  { echo "FAIL: the checkpoint after the skipped updates holds other weights than update 4's"; exit 1; }
echo "ok: updates 5-7 skipped and counted, run stopped with status 1, step_7.h5 holds update 4's weights"
