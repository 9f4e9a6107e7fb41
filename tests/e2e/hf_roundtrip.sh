#!/usr/bin/env bash
# mpi: trident checkpoint -> Hugging Face (f32) -> trident checkpoint is bitwise identical (h5diff
# of /model), for gpt2, llama (untied, no biases) and llama with q/k/v biases and a tied head, from
# checkpoints saved by 1 rank and by tp2 pp2, converted on 1 and on 3-4 ranks (several shards, each
# written by its rank); then train --init.from the converted llama in two layouts.
#   hf_roundtrip.sh TRIDENT REPO_ROOT MPIRUN ARGS...
set -uo pipefail
source "$(dirname "$0")/lib.sh"
fail() { echo "FAIL: $*"; exit 1; }
small=(--backend cpu --data.train "$data" --model.n_layer 2 --model.n_head 4 --model.n_embd 64 --model.vocab_size 300
       --model.seq_len 16 --train.micro_batch_size 2 --train.global_batch_size 4 --log.every 1)
declare -A variants=(
  [gpt2]=""
  [llama]="--model.arch llama --model.n_kv_head 2 --model.ffn_hidden_size 96"
  [qwen2]="--model.arch llama --model.n_kv_head 2 --model.ffn_hidden_size 96 --model.qkv_bias true --model.tie_embeddings true"
)
for v in gpt2 llama qwen2; do
  read -ra model <<<"${variants[$v]}"
  for layout in "1" "4 --parallel.tp 2 --parallel.pp 2"; do
    read -ra lay <<<"$layout"
    np=${lay[0]} tag=$v-np${lay[0]}
    "$@" -np "$np" "$trident" train "${small[@]}" "${model[@]}" "${lay[@]:1}" --train.steps 1 --checkpoint.dir "$out/$tag" \
      >"$out/$tag.log" 2>&1 || { cat "$out/$tag.log"; fail "$tag: training"; }
    ck=$out/$tag/step_1.h5
    # Out on one rank in one file, in on four; out on three ranks in several shards, in on one.
    "$@" -np 1 "$trident" convert --to-hf "$ck" --out "$out/$tag-hf1" --dtype f32 >/dev/null || fail "$tag: to-hf np1"
    "$@" -np 4 "$trident" convert --from-hf "$out/$tag-hf1" --out "$out/$tag-back1.h5" >/dev/null || fail "$tag: from-hf np4"
    "$@" -np 3 "$trident" convert --to-hf "$ck" --out "$out/$tag-hf3" --dtype f32 --shard-bytes 60000 >/dev/null ||
      fail "$tag: to-hf np3"
    shards=$(find "$out/$tag-hf3" -name 'model-*-of-*.safetensors' | wc -l)
    [[ -f $out/$tag-hf3/model.safetensors.index.json && $shards -ge 3 ]] ||
      fail "$tag: --shard-bytes 60000 did not give several shards: $(ls "$out/$tag-hf3")"
    "$@" -np 1 "$trident" convert --from-hf "$out/$tag-hf3" --out "$out/$tag-back3.h5" >/dev/null || fail "$tag: from-hf np1"
    for back in back1 back3; do
      h5diff "$ck" "$out/$tag-$back.h5" /model /model >"$out/diff.txt" 2>&1 ||
        { head -20 "$out/diff.txt"; fail "$tag: $back.h5 differs from the trained checkpoint"; }
    done
    cmp -s "$out/$tag-hf1/config.json" "$out/$tag-hf3/config.json" || fail "$tag: config.json differs between rank counts"
    echo "ok   $tag: checkpoint -> HF f32 -> checkpoint bitwise (1 file and $shards shards)"
  done
done
# A weights-only checkpoint cannot be resumed, only started from.
"$@" -np 1 "$trident" train "${small[@]}" --train.steps 1 --checkpoint.resume "$out/llama-np1-back1.h5" --checkpoint.dir "$out/r" \
  --model.arch llama --model.n_kv_head 2 --model.ffn_hidden_size 96 >"$out/resume.log" 2>&1
[[ $? == 2 ]] && grep -q "weights only.*--init.from" "$out/resume.log" || { cat "$out/resume.log"; fail "resuming a weights-only checkpoint"; }
# Fine-tuning from the converted llama (an HF directory and a checkpoint) in two layouts: the first
# step's loss is the trained checkpoint's model on the first batch, whichever the source and layout.
losses=()
for layout in "1" "4 --parallel.tp 2 --parallel.pp 2"; do
  read -ra lay <<<"$layout"
  for from in "$out/llama-np1-hf1" "$out/llama-np1-back1.h5"; do
    "$@" -np "${lay[0]}" "$trident" train "${small[@]}" --model.arch llama --model.n_kv_head 2 --model.ffn_hidden_size 96 \
      "${lay[@]:1}" --init.from "$from" --train.steps 3 >"$out/ft.log" 2>&1 || { cat "$out/ft.log"; fail "init.from $from"; }
    grep -q "init: weights from $from" "$out/ft.log" || { cat "$out/ft.log"; fail "no init line"; }
    losses+=("$(sed -n 's/^step *1\/3 .*loss \([0-9.]*\).*/\1/p' "$out/ft.log")")
  done
  echo "ok   train --init.from (HF directory and checkpoint) on ${lay[0]} rank(s): first losses ${losses[*]}"
done
[[ ${#losses[@]} == 4 && -n ${losses[0]} ]] || fail "no step-1 losses in the logs: ${losses[*]}"
for l in "${losses[@]}"; do
  awk -v a="$l" -v b="${losses[0]}" 'BEGIN {d = a - b; exit !((d < 0 ? -d : d) <= 1e-4 * b)}' ||
    fail "first-step losses differ: ${losses[*]}"
done
echo "all checks passed"
