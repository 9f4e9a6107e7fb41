#!/usr/bin/env bash
# e2e: DPO with dpo.reference = precomputed against the in-step reference model. From a briefly
# sft-trained llama-tiny, a precomputed run writes PREFIX_dpo_ref.bin beside the preference data
# (computed once from init.from before step 1) and then repeats the in-step run's losses, rewards
# and validation losses exactly, on one rank and on tp 2 (its own file, written by that layout); a
# run resumed from step 3 reads the file and repeats steps 4-6. A file of one rank read by tp 2
# matches within rounding. Bad files (another dataset's, another seq_len's, truncated) are refused
# in one line, exit 2.
#   dpo_precomputed.sh TRIDENT REPO_ROOT MPIRUN ARGS...   (the launcher starts 2 ranks)
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
/usr/bin/python3 "$root/tools/make_arithmetic_chat.py" --records 100 --seed 3 --system "" > "$out/chat.jsonl"
for seed in 4 5; do
  /usr/bin/python3 "$root/tools/make_arithmetic_chat.py" --format preference --rejected refusal --records 120 \
    --seed $seed > "$out/pref$seed.jsonl"
  "$trident" tokenize --input "$out/pref$seed.jsonl" --output "$out/pref$seed" --tokenizer byte --format preference \
    --chat-template plain --max-len 64 > /dev/null
done
"$trident" tokenize --input "$out/chat.jsonl" --output "$out/chat" --tokenizer byte --format chat \
  --chat-template plain --max-len 64 > /dev/null
model=(--config "$root/inputs/models/llama-tiny.cfg" --backend cpu --model.seq_len 48)
"$trident" train "${model[@]}" --task sft --data.train "$out/chat" --train.micro_batch_size 8 \
  --train.global_batch_size 16 --train.steps 4 --train.lr 3e-3 --checkpoint.dir "$out/sft" > "$out/sft.log"
dpo=("${model[@]}" --task dpo --init.from "$out/sft/step_4.h5" --data.train "$out/pref4" --data.split 0.9
     --dpo.beta 0.1 --train.micro_batch_size 4 --train.global_batch_size 16 --train.steps 6 --train.warmup_steps 2
     --train.lr 1e-3 --train.eval_every 3 --train.eval_steps 1 --log.every 3)

run() {   # run NAME [LAUNCHER...] -- ARGS...: metrics in $out/NAME.jsonl, log in $out/NAME.log
  local name=$1 launcher=()
  shift
  while [[ $1 != -- ]]; do launcher+=("$1"); shift; done
  shift
  "${launcher[@]}" "$trident" train "${dpo[@]}" --log.metrics "$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1 ||
    { echo "run $name failed"; cat "$out/$name.log"; exit 1; }
}
same() {   # same A B [FIRST] [TOLERANCE]: metrics of B equal A's from step FIRST + 1 (within TOLERANCE)
  /usr/bin/python3 - "$out/$1.jsonl" "$out/$2.jsonl" "${3:-0}" "${4:-0}" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:3])
first, tol = int(sys.argv[3]), float(sys.argv[4])
keys = ("loss", "accuracy", "margin", "chosen_reward", "rejected_reward", "val_loss", "grad_norm")
a = a[first:]
assert len(a) == len(b) and a, (len(a), len(b))
worst = 0.0
for ra, rb in zip(a, b):
    for k in keys:
        x, y = ra.get(k), rb.get(k)
        assert (x is None) == (y is None), (k, x, y)
        if x is not None:
            worst = max(worst, abs(x - y) / max(abs(x), 1e-3))
assert worst <= tol, f"{sys.argv[2]} differs from {sys.argv[1]}: worst relative difference {worst:.3e} > {tol}"
print(f"{sys.argv[2].split('/')[-1]} vs {sys.argv[1].split('/')[-1]}: worst relative difference {worst:.3e}")
PY
}
ref_file=$out/pref4_dpo_ref.bin

run model1 -- --dpo.reference model
run pre1 -- --dpo.reference precomputed
grep -q "dpo: reference log-probabilities of 120 pairs computed from init.from" "$out/pre1.log" ||
  { echo "pre1 did not compute the reference file"; cat "$out/pre1.log"; exit 1; }
[[ -f $ref_file ]] || { echo "no $ref_file"; exit 1; }
same model1 pre1
echo "one rank: the precomputed reference repeats the in-step reference exactly"

run model2 "$@" -- --dpo.reference model --parallel.tp 2
run pre2_read "$@" -- --dpo.reference precomputed --parallel.tp 2
grep -q "read from $ref_file" "$out/pre2_read.log" || { echo "pre2_read did not read the file"; exit 1; }
same model2 pre2_read 0 1e-4
mv "$ref_file" "$out/one_rank_ref.bin"
run pre2 "$@" -- --dpo.reference precomputed --parallel.tp 2 --checkpoint.dir "$out/ckpt" --checkpoint.every 3
same model2 pre2
echo "tp 2: the precomputed reference (written by tp 2) repeats the in-step reference exactly"

mkdir "$out/resumed"
cp "$out/ckpt/step_3.h5" "$out/resumed/"
run resumed "$@" -- --dpo.reference precomputed --parallel.tp 2 --checkpoint.dir "$out/resumed"
grep -q "read from $ref_file" "$out/resumed.log" || { echo "the resumed run did not read the file"; exit 1; }
same pre2 resumed 3
echo "resumed from step 3: steps 4-6 repeat the uninterrupted run exactly"

# Bad files: each a one-line error, exit 2, and the file left as it was.
expect_bad() {   # expect_bad WHAT PATTERN ARGS...
  local what=$1 pattern=$2
  shift 2
  set +e
  "$trident" train --config "$root/inputs/models/llama-tiny.cfg" --backend cpu --task dpo \
    --init.from "$out/sft/step_4.h5" --dpo.reference precomputed --data.split 0.9 --train.micro_batch_size 4 \
    --train.global_batch_size 16 --train.steps 1 "$@" > "$out/bad.log" 2>&1
  local rc=$?
  set -e
  [[ $rc == 2 ]] || { echo "$what: exit $rc, expected 2"; cat "$out/bad.log"; exit 1; }
  grep -q "$pattern" "$out/bad.log" || { echo "$what: no '$pattern'"; cat "$out/bad.log"; exit 1; }
  [[ $(grep -c "error" "$out/bad.log") == 1 ]] || { echo "$what: not one error line"; cat "$out/bad.log"; exit 1; }
}
cp "$ref_file" "$out/pref5_dpo_ref.bin"
expect_bad "another dataset's file" "pref5_dpo_ref.bin: written for another dataset" --data.train "$out/pref5" \
  --model.seq_len 48
expect_bad "another seq_len" "pref4_dpo_ref.bin: written for model.seq_len = 48, this run has 40" \
  --data.train "$out/pref4" --model.seq_len 40 --model.n_positions 48
cp "$ref_file" "$out/whole.bin"
head -c 1000 "$out/whole.bin" > "$ref_file"
expect_bad "truncated file" "pref4_dpo_ref.bin: 1000 bytes, expected .* (truncated?)" --data.train "$out/pref4" \
  --model.seq_len 48
cmp -s <(head -c 1000 "$out/whole.bin") "$ref_file" || { echo "the truncated file was changed"; exit 1; }
echo "dpo_precomputed: ok"
