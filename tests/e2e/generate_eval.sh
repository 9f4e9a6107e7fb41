#!/usr/bin/env bash
# e2e: a checkpoint of a briefly trained tiny model is evaluated (`trident eval`: the training
# run's validation loss again, also with the checkpoint alone) and sampled (`trident generate`): greedy output is identical across
# runs and across tp 1 / tp 2 / pp 2; a file of prompts generates the same JSON lines in batches of
# 2 on one rank, split over dp 2, on tp 2 and on pp 2, and --stop ends completions at a token. MODEL (environment) names the preset: tiny (GPT-2, the default) or
# llama-tiny.
#   generate_eval.sh TRIDENT REPO_ROOT MPIRUN ARGS...
set -uo pipefail
trident=$1 root=$2
shift 2
mpirun=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$@" -np 1 "$trident" train --config "$root/inputs/models/${MODEL:-tiny}.cfg" --backend cpu --data.train "$root/data/fortunes_byte" \
  --data.split 0.95 --model.seq_len 64 --model.n_layer 2 --train.micro_batch_size 8 --train.global_batch_size 8 \
  --train.steps 60 --train.eval_every 30 --train.eval_steps 2 --log.every 30 --checkpoint.dir "$work/ck" \
  --log.metrics "$work/m.jsonl" >"$work/train.log" 2>&1 || { cat "$work/train.log"; fail "training"; }
grep -q '"val_loss"' "$work/m.jsonl" || fail "no val_loss in the metrics"
"$@" -np 1 "$trident" eval --checkpoint "$work/ck/step_60.h5" --data.train "$root/data/fortunes_byte" \
  --data.split 0.95 --train.eval_steps 2 --backend cpu >"$work/eval.log" 2>&1 || { cat "$work/eval.log"; fail "eval"; }
grep -q "on validation data, 2 batches of .* loss [0-9.]*, perplexity" "$work/eval.log" || { cat "$work/eval.log"; fail "eval output"; }
# The evaluation-only trainer (no gradients, no optimizer, parameters from the checkpoint) gives
# the validation loss the training run logged after the same step.
trained=$(grep '"val_loss"' "$work/m.jsonl" | tail -1 | sed 's/.*"val_loss":\([0-9.e+-]*\).*/\1/')
evaluated=$(sed -n 's/.* loss \([0-9.e+-]*\), perplexity.*/\1/p' "$work/eval.log")
awk -v a="$trained" -v b="$evaluated" 'BEGIN {d = a - b; exit !(a > 0 && (d < 0 ? -d : d) <= 1e-5 * a)}' ||
  fail "eval loss $evaluated differs from the training run's val_loss $trained at the same step"
# With the checkpoint alone, eval reads the validation split of the checkpoint's stored data
# settings: the same loss. --data.val alone is enough, without data.train.
"$@" -np 1 "$trident" eval --checkpoint "$work/ck/step_60.h5" --train.eval_steps 2 --backend cpu \
  >"$work/eval_stored.log" 2>&1 || { cat "$work/eval_stored.log"; fail "eval with the checkpoint alone"; }
stored=$(sed -n 's/.* on validation data, .* loss \([0-9.e+-]*\), perplexity.*/\1/p' "$work/eval_stored.log")
[[ -n $stored && $stored == "$evaluated" ]] ||
  { cat "$work/eval_stored.log"; fail "eval with the checkpoint alone: loss '$stored', expected $evaluated"; }
"$@" -np 1 "$trident" eval --checkpoint "$work/ck/step_60.h5" --data.val "$root/data/fortunes_byte" \
  --train.eval_steps 1 --backend cpu >"$work/eval_val.log" 2>&1 || { cat "$work/eval_val.log"; fail "eval --data.val"; }
grep -q "on validation data" "$work/eval_val.log" || { cat "$work/eval_val.log"; fail "eval --data.val output"; }
gen() {   # ranks, generate options...
  local np=$1
  shift
  "${mpirun[@]}" -np "$np" "$trident" generate --checkpoint "$work/ck/step_60.h5" --prompt "The " --max-new-tokens 40 \
    --backend cpu --stop-at-eot false "$@" 2>&1 | grep -v '^\['
}
gen 1 --temperature 0 >"$work/g1.txt"
gen 1 --temperature 0 >"$work/g2.txt"
gen 2 --temperature 0 --parallel.tp 2 >"$work/g3.txt"
gen 2 --temperature 0 --parallel.pp 2 >"$work/g5.txt"
gen 1 --temperature 0.9 --top-k 20 --seed 5 >"$work/g4.txt"
cat "$work/g1.txt" "$work/g4.txt"
[[ -s $work/g1.txt ]] || fail "greedy generation printed nothing"
cmp -s "$work/g1.txt" "$work/g2.txt" || fail "greedy generation differs between runs"
cmp -s "$work/g1.txt" "$work/g3.txt" || fail "greedy generation differs between tp 1 and tp 2"
cmp -s "$work/g1.txt" "$work/g5.txt" || fail "greedy generation differs between pp 1 and pp 2"
grep -q "^The " "$work/g4.txt" || fail "sampled generation lost the prompt"
printf 'The \n"A fortune"\n\n{"prompt": "You will"}\nNo\nEvery\n' >"$work/prompts.txt"
gen_file() {   # ranks, output, generate options...
  local np=$1 out=$2
  shift 2
  "${mpirun[@]}" -np "$np" "$trident" generate --checkpoint "$work/ck/step_60.h5" --prompts "$work/prompts.txt" \
    --max-new-tokens 24 --backend cpu --temperature 0.9 --seed 3 "$@" >"$out" 2>"$out.err" ||
    { cat "$out" "$out.err"; fail "generate --prompts $*"; }
}
gen_file 1 "$work/p1.jsonl" --batch 2
gen_file 2 "$work/p2.jsonl" --batch 3
gen_file 2 "$work/p3.jsonl" --parallel.tp 2
gen_file 2 "$work/p5.jsonl" --parallel.pp 2
gen_file 1 "$work/p4.jsonl" --stop " "
cat "$work/p1.jsonl" "$work/p4.jsonl"
[[ $(grep -c '^{"prompt":' "$work/p1.jsonl") == 5 ]] || fail "generate --prompts: expected 5 JSON lines"
grep -q '^{"prompt":"You will","completion":' "$work/p1.jsonl" || fail "generate --prompts: JSON prompt not read"
grep -q "tokens/s; batch 2" "$work/p1.jsonl" || { cat "$work/p1.jsonl.err"; fail "generate --prompts: no tokens/s"; }
cmp -s <(grep '^{' "$work/p1.jsonl") <(grep '^{' "$work/p2.jsonl") || fail "generate --prompts differs between 1 rank and dp 2"
cmp -s <(grep '^{' "$work/p1.jsonl") <(grep '^{' "$work/p3.jsonl") || fail "generate --prompts differs between 1 rank and tp 2"
cmp -s <(grep '^{' "$work/p1.jsonl") <(grep '^{' "$work/p5.jsonl") || fail "generate --prompts differs between 1 rank and pp 2"
grep -q '"completion":"[^ "]*","tokens":[0-9]*,"stopped":true' "$work/p4.jsonl" || fail "--stop ' ' stopped nothing"
! grep -q '"completion":"[^"]* ' "$work/p4.jsonl" || fail "--stop ' ': a completion goes past a space"
"${mpirun[@]}" -np 1 "$trident" generate --checkpoint "$work/ck/step_60.h5" --prompts "$work/none.txt" --backend cpu \
  >"$work/bad.log" 2>&1 && fail "a missing --prompts file was accepted"
grep -q "prompts.*cannot open the file" "$work/bad.log" || { cat "$work/bad.log"; fail "missing --prompts file message"; }
echo "ok: eval and generation from a trained checkpoint; greedy output stable across runs and tp; prompt files alike on 1 rank, dp 2 and tp 2"
