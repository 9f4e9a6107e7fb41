#!/usr/bin/env bash
# e2e: supervised fine-tuning teaches a tiny Llama single-digit addition, measured on questions it
# never trained on. make_arithmetic_chat.py splits the 100 questions "What is a + b?" (a, b in 0..9)
# into a training part and a held-out part of 26; the model is prompted with the plain template as
# in training (generate --chat-template plain), greedy, and its exact-match accuracy on the held-out
# questions (tools/score_answers.py) is measured at its initialisation (step_0.h5) and after SFT.
# Any launcher works: its ranks train data-parallel and generate a share of the prompts each.
#   sft_heldout.sh TRIDENT REPO_ROOT [MPIRUN ARGS...]
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
questions=(--ops + --max-operand 9 --heldout-share 0.25)
/usr/bin/python3 "$root/tools/make_arithmetic_chat.py" "${questions[@]}" --part train --records 3000 --seed 1 \
  --system "" > "$out/train.jsonl"
/usr/bin/python3 "$root/tools/make_arithmetic_chat.py" "${questions[@]}" --part heldout --format eval --records 26 \
  --seed 2 > "$out/heldout.jsonl"
/usr/bin/python3 - "$out/train.jsonl" "$out/heldout.jsonl" <<'PY'
import json, sys
trained = {json.loads(l)["messages"][0]["content"] for l in open(sys.argv[1])}
held = [json.loads(l)["prompt"] for l in open(sys.argv[2])]
print(f"{len(trained)} distinct training questions, {len(held)} held-out ones")
assert len(set(held)) == len(held) == 26 and not trained & set(held), "the held-out questions are not apart"
assert len(trained) == 74, "the training part should hold the other 74 questions"
PY
"$trident" tokenize --input "$out/train.jsonl" --output "$out/arith" --tokenizer byte --format chat \
  --chat-template plain > "$out/tokenize.log"

# A 2-layer, 64-wide llama-tiny; records packed into sequences of 128 (about 3.4 records each).
model=(--config "$root/inputs/models/llama-tiny.cfg" --backend cpu --task sft --model.n_layer 2 --model.n_embd 64
       --model.ffn_hidden_size 176 --model.seq_len 128 --data.train "$out/arith" --data.pack true)
"$@" "$trident" train "${model[@]}" --train.steps 0 --checkpoint.dir "$out/init" > "$out/init.log" ||
  { cat "$out/init.log"; exit 1; }
start=$SECONDS
"$@" "$trident" train "${model[@]}" --init.from "$out/init/step_0.h5" --train.steps 250 --train.micro_batch_size 8 \
  --train.global_batch_size 16 --train.lr 3e-3 --train.warmup_steps 10 --log.every 50 --log.metrics "$out/m.jsonl" \
  --checkpoint.dir "$out/sft" > "$out/train.log" || { cat "$out/train.log"; exit 1; }
grep -E "^(train [^=]|step )" "$out/train.log"
echo "fine-tuning took $((SECONDS - start)) s"

launcher=("$@")
accuracy() {   # checkpoint -> prints the exact-match line
  "${launcher[@]}" "$trident" generate --checkpoint "$1" --prompts "$out/heldout.jsonl" --chat-template plain --temperature 0 \
    --max-new-tokens 4 --batch 26 --backend cpu > "$out/generated.jsonl" 2> "$out/generate.err" ||
    { cat "$out/generate.err"; exit 1; }
  /usr/bin/python3 "$root/tools/score_answers.py" --answers "$out/heldout.jsonl" --completions "$out/generated.jsonl"
}
before=$(accuracy "$out/init/step_0.h5")
head -3 "$out/generated.jsonl"
after=$(accuracy "$out/sft/step_250.h5")
head -3 "$out/generated.jsonl"
echo "held-out exact match before SFT: ${before#exact match: }, after: ${after#exact match: }"
/usr/bin/python3 - "$out/m.jsonl" "$before" "$after" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first = sum(r["loss"] for r in rows[:3]) / 3
last = sum(r["loss"] for r in rows[-10:]) / 10
print(f"masked loss of steps 1-3: {first:.3f}, of steps 241-250: {last:.3f}")
assert first > 4.5, f"initial masked loss {first:.3f} should be near ln(257) = 5.55"
assert last < 0.5, f"masked loss after SFT {last:.3f} is not below 0.5"
before, after = (float(s.split("= ")[1]) for s in sys.argv[2:4])
# Measured: 0/26 at initialisation, 19/26 after SFT in about 45 s of training (20/26 on two ranks,
# dp 2; the summation order moves answers near a tie). With micro-batches of 16: 21/26, and with
# train.seed 3 and 7, 23 and 24; after 200 steps 17. So at least half is asked of it.
assert before <= 0.1, f"held-out accuracy {before} at initialisation should be near 0"
assert after >= 0.5, f"held-out accuracy after SFT {after} is below 0.5"
PY
echo "sft_heldout: ok"
