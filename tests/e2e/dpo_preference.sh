#!/usr/bin/env bash
# e2e: direct preference optimisation from a generated preference set. llama-tiny is fine-tuned
# briefly with --task sft on synthetic arithmetic chat, then trained with --task dpo from that
# checkpoint on arithmetic preference pairs (the sum chosen, a refusal to answer rejected): the DPO
# loss falls from ln 2 (policy = reference) and the reward accuracy rises above 0.9, and the DPO loss
# of held-out pairs (data.split, train.eval_every) falls below 0.1. A run resumed
# from its step-10 checkpoint (the reference read again from init.from) repeats steps 11-20 exactly.
# Bad inputs:
# dpo without init.from, a chat dataset for dpo, an odd micro-batch.
#   dpo_preference.sh TRIDENT REPO_ROOT [MPIRUN ARGS...]
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
/usr/bin/python3 "$root/tools/make_arithmetic_chat.py" --records 400 --seed 3 --system "" > "$out/chat.jsonl"
/usr/bin/python3 "$root/tools/make_arithmetic_chat.py" --format preference --rejected refusal --records 400 \
  --seed 4 > "$out/pref.jsonl"
"$trident" tokenize --input "$out/chat.jsonl" --output "$out/chat" --tokenizer byte --format chat \
  --chat-template plain --max-len 64 > /dev/null
"$trident" tokenize --input "$out/pref.jsonl" --output "$out/pref" --tokenizer byte --format preference \
  --chat-template plain --max-len 64 > /dev/null
model=(--config "$root/inputs/models/llama-tiny.cfg" --backend cpu --model.seq_len 48)

"$@" "$trident" train "${model[@]}" --task sft --data.train "$out/chat" --train.micro_batch_size 8 \
  --train.global_batch_size 16 --train.steps 10 --train.warmup_steps 3 --train.lr 3e-3 \
  --checkpoint.dir "$out/sft" --log.every 10 > "$out/sft.log"

"$@" "$trident" train "${model[@]}" --task dpo --init.from "$out/sft/step_10.h5" --data.train "$out/pref" \
  --data.split 0.9 --dpo.beta 0.1 --train.micro_batch_size 8 --train.global_batch_size 16 --train.steps 20 \
  --train.warmup_steps 3 --train.lr 1e-3 --train.min_lr 1e-3 --train.eval_every 10 --train.eval_steps 1 --log.every 5 --log.metrics "$out/m.jsonl" --checkpoint.dir "$out/dpo" \
  --checkpoint.every 10 | tee "$out/dpo.log"
grep -q "accuracy .* | margin .* | chosen .* | rejected " "$out/dpo.log" || { echo "no reward metrics in the progress line"; exit 1; }
/usr/bin/python3 - "$out/m.jsonl" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 20, f"expected 20 metrics rows, got {len(rows)}"
# Step 1: the policy is its reference, so every reward is 0 and the loss ln 2.
assert abs(rows[0]["loss"] - math.log(2)) < 1e-4, f"first DPO loss {rows[0]['loss']} is not ln 2"
assert rows[0]["chosen_reward"] == 0 and rows[0]["rejected_reward"] == 0, rows[0]
last = rows[-5:]
loss = sum(r["loss"] for r in last) / 5
acc = sum(r["accuracy"] for r in last) / 5
margin = sum(r["margin"] for r in last) / 5
print(f"dpo: loss {rows[0]['loss']:.4f} -> {loss:.4f}, reward accuracy {rows[0]['accuracy']:.2f} -> "
      f"{acc:.2f}, margin {rows[0]['margin']:.4f} -> {margin:.4f} (means of steps 16-20)")
assert loss < 0.5, f"DPO loss of the last steps {loss:.4f} is not below 0.5"
assert acc > 0.9, f"reward accuracy of the last steps {acc:.2f} is not above 0.9"
val = [r["val_loss"] for r in rows if r.get("val_loss") is not None]
print(f"dpo: validation loss on held-out pairs {val}")
assert len(val) == 2 and val[-1] < 0.1, f"validation DPO loss {val} is not below 0.1 at step 20"
PY

mkdir "$out/resumed"
cp "$out/dpo/step_10.h5" "$out/resumed/"
"$@" "$trident" train "${model[@]}" --task dpo --init.from "$out/sft/step_10.h5" --data.train "$out/pref" \
  --data.split 0.9 --dpo.beta 0.1 --train.micro_batch_size 8 --train.global_batch_size 16 --train.steps 20 \
  --train.warmup_steps 3 --train.lr 1e-3 --train.min_lr 1e-3 --train.eval_every 10 --train.eval_steps 1 --log.every 5 --log.metrics "$out/m2.jsonl" --checkpoint.dir "$out/resumed" \
  > "$out/resumed.log"
/usr/bin/python3 - "$out/m.jsonl" "$out/m2.jsonl" <<'PY'
import json, sys
whole, resumed = ([json.loads(l) for l in open(f)] for f in sys.argv[1:])
keys = ("loss", "accuracy", "margin", "chosen_reward", "rejected_reward")
got = [[r[k] for k in keys] for r in resumed]
want = [[r[k] for k in keys] for r in whole[10:]]
assert got == want, f"resumed steps 11-20 differ from the uninterrupted run: {got} vs {want}"
print("dpo: resumed from step 10, steps 11-20 repeat the uninterrupted run exactly")
PY

# Bad inputs: each a one-line error, exit 2.
expect_bad() {   # expect_bad WHAT PATTERN ARGS...
  local what=$1 pattern=$2
  shift 2
  set +e
  "$trident" train "${model[@]}" --task dpo --train.steps 1 "$@" > "$out/bad.log" 2>&1
  local rc=$?
  set -e
  [[ $rc == 2 ]] || { echo "$what: exit $rc, expected 2"; cat "$out/bad.log"; exit 1; }
  grep -q "$pattern" "$out/bad.log" || { echo "$what: no '$pattern'"; cat "$out/bad.log"; exit 1; }
}
expect_bad "dpo without init.from" "init.from is empty: task dpo" --data.train "$out/pref"
expect_bad "chat data for dpo" "chat.idx: document 0 holds 1 sequences, expected 2" --init.from "$out/sft/step_10.h5" \
  --data.train "$out/chat"
expect_bad "odd micro-batch" "train.micro_batch_size = 3: must be even for task dpo" --init.from "$out/sft/step_10.h5" \
  --data.train "$out/pref" --train.micro_batch_size 3 --train.global_batch_size 3
echo "dpo_preference: ok"
