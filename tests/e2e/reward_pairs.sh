#!/usr/bin/env bash
# e2e: a reward model (--task reward) on a generated preference set. Arithmetic questions whose
# chosen answer is the number and whose rejected one is a refusal are tokenized with the byte
# tokenizer; llama-tiny, started (--init.from) from a language model's checkpoint, trains its
# score head and its pair accuracy rises to 0.9 or more on training and held-out pairs (in training
# and in trident eval of its checkpoint). Its export to Hugging Face (LlamaForSequenceClassification)
# converted back evaluates the same. Then the refusals: an odd micro-batch, a reward checkpoint given
# to a language-model run, eval or generate, a language model's checkpoint resumed by a reward run
# (each exit 2 with a one-line reason).
#   reward_pairs.sh TRIDENT REPO_ROOT [MPIRUN ARGS...]
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
/usr/bin/python3 - > "$out/pref.jsonl" <<'PY'
import json, random
rng = random.Random(5)
for _ in range(400):
    a, b = rng.randint(0, 20), rng.randint(0, 20)
    print(json.dumps({"prompt": f"What is {a} + {b}?", "chosen": str(a + b), "rejected": "I do not know."}))
PY
"$trident" tokenize --input "$out/pref.jsonl" --output "$out/pref" --tokenizer byte --format preference \
  --chat-template plain > "$out/tokenize.log"
model=(--config "$root/inputs/models/llama-tiny.cfg" --backend cpu --model.seq_len 64)

# A language model's checkpoint (one pre-training step) to start from.
"$@" "$trident" train "${model[@]}" --data.train "$data" --train.steps 1 --train.micro_batch_size 2 \
  --train.global_batch_size 2 --checkpoint.dir "$out/lm" > "$out/lm.log" 2>&1 || { cat "$out/lm.log"; exit 1; }

"$@" "$trident" train "${model[@]}" --task reward --init.from "$out/lm/step_1.h5" --data.train "$out/pref" \
  --data.split 0.9 --train.micro_batch_size 8 --train.global_batch_size 16 --train.steps 24 \
  --train.warmup_steps 3 --train.lr 3e-3 --train.eval_every 24 --train.eval_steps 2 --log.every 6 \
  --log.metrics "$out/m.jsonl" --checkpoint.dir "$out/rm" | tee "$out/train.log"
grep -q "score.weight initialised from train.seed" "$out/train.log" || { echo "no fresh score head"; exit 1; }
/usr/bin/python3 - "$out/m.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 24, f"expected 24 metrics rows, got {len(rows)}"
first = sum(r["accuracy"] for r in rows[:3]) / 3
last = sum(r["accuracy"] for r in rows[-4:]) / 4
val = rows[-1]["val_accuracy"]
print(f"pair accuracy of steps 1-3: {first:.3f}, of steps 21-24: {last:.3f}; validation {val:.3f}; "
      f"loss {rows[0]['loss']:.3f} -> {rows[-1]['loss']:.3f}, margin {rows[-1]['margin']:.3f}")
assert abs(rows[0]["loss"] - 0.693) < 0.05, f"initial pair loss {rows[0]['loss']:.3f} should be near ln 2"
assert last >= 0.9 and val >= 0.9, f"pair accuracy {last:.3f} (validation {val:.3f}) is not 0.9 or more"
PY

# trident eval scores the held-out pairs of the checkpoint's stored data.
"$@" "$trident" eval --checkpoint "$out/rm/step_24.h5" --backend cpu --train.eval_steps 2 | tee "$out/eval.log"
grep -Eq "on validation data.*pair accuracy (0\.9|1)" "$out/eval.log" || { echo "eval: no pair accuracy of 0.9 or more"; exit 1; }
# ... and pairs given as data.val alone (no data.train).
"$@" "$trident" eval --checkpoint "$out/rm/step_24.h5" --backend cpu --task reward --data.val "$out/pref" \
  --train.eval_steps 1 | tee "$out/eval_val.log"
grep -Eq "on validation data.*pair accuracy" "$out/eval_val.log" || { echo "eval --data.val: no pair accuracy"; exit 1; }

# To Hugging Face and back: the same pair loss, accuracy and margin on the same pairs.
"$trident" convert --to-hf "$out/rm/step_24.h5" --out "$out/hf" --dtype f32 > /dev/null
grep -q '"LlamaForSequenceClassification"' "$out/hf/config.json" || { cat "$out/hf/config.json"; exit 1; }
"$trident" convert --from-hf "$out/hf" --out "$out/back.h5" > /dev/null
"$@" "$trident" eval --checkpoint "$out/back.h5" --backend cpu --task reward --data.val "$out/pref" \
  --train.eval_steps 1 | tee "$out/eval_back.log"
[[ "$(grep -o 'loss.*' "$out/eval_val.log")" == "$(grep -o 'loss.*' "$out/eval_back.log")" ]] ||
  { echo "the reward model converted to Hugging Face and back evaluates differently"; exit 1; }

refused() {   # refused NAME PATTERN COMMAND...: exit status 2 and the pattern in the output
  local name=$1 pattern=$2
  shift 2
  set +e
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  set -e
  [[ $rc == 2 ]] || { echo "$name: exit $rc, expected 2"; cat "$out/$name.log"; exit 1; }
  grep -q -- "$pattern" "$out/$name.log" || { echo "$name: no '$pattern'"; cat "$out/$name.log"; exit 1; }
}
refused odd_micro "train.micro_batch_size.*must be even" \
  "$trident" train "${model[@]}" --task reward --data.train "$out/pref" --train.micro_batch_size 3 \
  --train.global_batch_size 6
refused reward_into_lm "the weights are a reward model.*--task reward" \
  "$trident" train "${model[@]}" --init.from "$out/rm/step_24.h5" --data.train "$data" --train.steps 1
refused lm_resumed_as_reward "holds a language model, not a reward model.*--init.from" \
  "$@" "$trident" train "${model[@]}" --task reward --data.train "$out/pref" --train.micro_batch_size 2 \
  --train.global_batch_size 2 --checkpoint.dir "$out/lm" --checkpoint.resume "$out/lm/step_1.h5" --train.steps 2
refused eval_as_lm "holds a reward model.*loads only with --task reward" \
  "$trident" eval --checkpoint "$out/rm/step_24.h5" --backend cpu --data.val "$data" --train.eval_steps 1
refused generate "a reward model (task = reward) scores text but has no LM head" \
  "$trident" generate --checkpoint "$out/rm/step_24.h5" --tokenizer byte --prompt "What is 1 + 1?"
echo "reward_pairs: ok"
