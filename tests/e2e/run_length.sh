#!/usr/bin/env bash
# e2e: a run resumed from its step-10 checkpoint with train.steps raised from 20 to 40 keeps the
# learning rate of the uninterrupted 20-step run (the decay keeps its length), and train.tokens and
# train.epochs set the number of steps.
#   run_length.sh TRIDENT REPO_ROOT [MPIRUN ARGS...]
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
args=(--config "$root/inputs/models/tiny.cfg" --backend cpu --data.train "$data" --model.n_layer 1
      --model.seq_len 16 --train.micro_batch_size 2 --train.global_batch_size 4 --train.warmup_steps 2)
run() { "$@" >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }; }
run "$@" "$trident" train "${args[@]}" --train.steps 20 --checkpoint.dir "$out/a" --checkpoint.every 10 \
  --log.metrics "$out/a.jsonl"
run "$@" "$trident" train "${args[@]}" --train.steps 40 --checkpoint.dir "$out/b" \
  --checkpoint.resume "$out/a/step_10.h5" --log.metrics "$out/b.jsonl"
grep -q "learning rate keeps decaying to train.min_lr at step 20" "$out/log" || { cat "$out/log"; echo "FAIL: no note"; exit 1; }
run "$@" "$trident" train "${args[@]}" --train.tokens 1000 --log.metrics "$out/t.jsonl"
grep -q "train.tokens = 1000: train.steps = 16 of 64 tokens (in place of train.steps = 200)" "$out/log" || { cat "$out/log"; echo "FAIL: tokens"; exit 1; }
run "$@" "$trident" train "${args[@]}" --train.epochs 0.002 --log.metrics "$out/e.jsonl"
sequences=$(sed -n 's/.* \([0-9]*\) sequences of 16$/\1/p' "$out/log" | head -1)
/usr/bin/python3 - "$out" "$sequences" <<'PY'
import json, math, sys
out, sequences = sys.argv[1], int(sys.argv[2])
rows = lambda name: [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
a = {r["step"]: r["lr"] for r in rows("a")}
b = {r["step"]: r["lr"] for r in rows("b")}
assert sorted(b) == list(range(11, 41)), f"resumed steps {sorted(b)}"
for s in range(11, 21):
    assert abs(a[s] - b[s]) <= 1e-12 * a[s], f"step {s}: resumed lr {b[s]} != uninterrupted {a[s]}"
assert all(abs(b[s] - a[20]) <= 1e-12 * a[20] for s in range(21, 41)), "after the decay the lr stays at min_lr"
assert len(rows("t")) == 16, f"train.tokens 1000 at 64 tokens per step: {len(rows('t'))} steps, expected 16"
want = math.ceil(0.002 * sequences / 4)
assert len(rows("e")) == want, f"train.epochs 0.002 of {sequences} sequences: {len(rows('e'))} steps, expected {want}"
print(f"ok: resumed lr matches steps 11-20 of the uninterrupted run; tokens -> 16 steps; epochs -> {want} steps")
PY
