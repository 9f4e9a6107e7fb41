#!/usr/bin/env bash
# mpi: trident checkpoint -> Hugging Face (f32) -> trident checkpoint is bitwise identical (h5diff
# of /model), for gpt2, llama (untied, no biases) and llama with q/k/v biases and a tied head, from
# checkpoints saved by 1 rank and by tp2 pp2, converted on 1 and on 3-4 ranks (several shards, each
# written by its rank); the same for reward models of the three (--task reward, saved by tp2 pp2:
# *ForSequenceClassification, no LM head); then train --init.from the converted llama in two
# layouts, and the converted reward model as a reward model.
#   hf_roundtrip.sh TRIDENT REPO_ROOT MPIRUN ARGS...
set -uo pipefail
source "$(dirname "$0")/lib.sh"
fail() { echo "FAIL: $*"; exit 1; }
# same_losses WHAT LOSS...: four first-step losses, equal within 1e-4 relative.
same_losses() {
  local what=$1 l
  shift
  [[ $# == 4 && -n $1 ]] || fail "$what: no step-1 losses in the logs: $*"
  for l; do
    awk -v a="$l" -v b="$1" 'BEGIN {d = a - b; exit !((d < 0 ? -d : d) <= 1e-4 * b)}' || fail "$what: first-step losses differ: $*"
  done
}
base=(--backend cpu --model.n_layer 2 --model.n_head 4 --model.n_embd 64 --model.vocab_size 300
      --train.micro_batch_size 2 --train.global_batch_size 4 --log.every 1)
small=("${base[@]}" --data.train "$data" --model.seq_len 16)
declare -A variants=(
  [gpt2]=""
  [llama]="--model.arch llama --model.n_kv_head 2 --model.ffn_hidden_size 96"
  [qwen2]="--model.arch llama --model.n_kv_head 2 --model.ffn_hidden_size 96 --model.qkv_bias true --model.tie_embeddings true"
)
# Reward models train on preference pairs short enough for seq_len 32.
/usr/bin/python3 -c 'import json, random
rng = random.Random(3)
for _ in range(16):
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    print(json.dumps({"prompt": f"{a}+{b}", "chosen": str(a + b), "rejected": "no"}))' >"$out/pref.jsonl"
"$trident" tokenize --input "$out/pref.jsonl" --output "$out/pref" --tokenizer byte --format preference \
  --chat-template plain >/dev/null || fail "tokenize the preference pairs"
reward=("${base[@]}" --task reward --data.train "$out/pref" --model.seq_len 32)
single="1" tp2pp2="4 --parallel.tp 2 --parallel.pp 2"
for v in gpt2 llama qwen2 gpt2-rm llama-rm qwen2-rm; do
  read -ra model <<<"${variants[${v%-rm}]}"
  run=("${small[@]}") layouts=("$single" "$tp2pp2")
  [[ $v == *-rm ]] && run=("${reward[@]}") layouts=("$tp2pp2")
  for layout in "${layouts[@]}"; do
    read -ra lay <<<"$layout"
    np=${lay[0]} tag=$v-np${lay[0]}
    "$@" -np "$np" "$trident" train "${run[@]}" "${model[@]}" "${lay[@]:1}" --train.steps 1 --checkpoint.dir "$out/$tag" \
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
    if [[ $v == *-rm ]]; then
      grep -q '"architectures": \[\s*"[A-Za-z0-9]*ForSequenceClassification"' <(tr -d '\n' <"$out/$tag-hf1/config.json") &&
        ! grep -q lm_head "$out/$tag-hf1/model.safetensors" && grep -q '"score.weight"' "$out/$tag-hf1/model.safetensors" ||
        fail "$tag: not a ForSequenceClassification with score.weight and no lm_head"
    fi
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
same_losses "init.from" "${losses[@]}"
llama=(--model.arch llama --model.n_kv_head 2 --model.ffn_hidden_size 96)
# The converted reward model (its HF directory and its checkpoint) starts a reward run with its
# score head: the same first loss from both, on one rank and on tp2 pp2.
losses=()
for layout in "$single" "$tp2pp2"; do
  read -ra lay <<<"$layout"
  for from in "$out/llama-rm-np4-hf1" "$out/llama-rm-np4-back1.h5"; do
    "$@" -np "${lay[0]}" "$trident" train "${reward[@]}" "${llama[@]}" "${lay[@]:1}" --init.from "$from" \
      --train.steps 1 >"$out/ft.log" 2>&1 || { cat "$out/ft.log"; fail "reward init.from $from"; }
    grep -q "init: weights from $from" "$out/ft.log" && ! grep -q "score.weight initialised" "$out/ft.log" ||
      { cat "$out/ft.log"; fail "reward init.from $from did not load the score head"; }
    losses+=("$(sed -n 's/^step *1\/1 .*loss \([0-9.]*\).*/\1/p' "$out/ft.log")")
  done
done
same_losses "reward init.from" "${losses[@]}"
echo "ok   train --task reward --init.from the converted reward model (HF directory and checkpoint), 1 and 4 ranks: ${losses[*]}"
"$trident" train "${small[@]}" "${llama[@]}" --init.from "$out/llama-rm-np4-hf1" --train.steps 1 >"$out/ft.log" 2>&1
[[ $? == 2 ]] && grep -q "the weights are a reward model.*--task reward" "$out/ft.log" ||
  { cat "$out/ft.log"; fail "a language-model run from a Hugging Face reward model"; }
# The tokenizer travels with the weights: a Hugging Face directory with a tokenizer.json (bytes,
# <|end|> 256 as EOS, <|bos|> 257 as BOS) is converted in, started from, resumed and exported
# again without --tokenizer: the same files come out, with its BOS/EOS ids in config.json, and
# generate finds it in the checkpoint. data.tokenizer names one for a run's checkpoints.
tok=$out/tok
mkdir -p "$tok"
python3 - "$tok" <<'PY'
import json, sys
printable = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
spell, n = {}, 0
for b in range(256):
    spell[b] = chr(b) if b in printable else chr(256 + n)
    n += b not in printable
tok = {"version": "1.0", "normalizer": None, "post_processor": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
       "added_tokens": [{"id": 256, "content": "<|end|>", "special": True}, {"id": 257, "content": "<|bos|>", "special": True}],
       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
       "model": {"type": "BPE", "vocab": {spell[b]: b for b in range(256)}, "merges": []}}
json.dump(tok, open(sys.argv[1] + "/tokenizer.json", "w"))
json.dump({"add_bos_token": True, "bos_token": "<|bos|>", "eos_token": "<|end|>"},
          open(sys.argv[1] + "/tokenizer_config.json", "w"))
PY
cp -r "$out/llama-np1-hf1" "$out/tok-hf" && cp "$tok"/* "$out/tok-hf/"
"$@" -np 2 "$trident" convert --from-hf "$out/tok-hf" --out "$out/tok.h5" >/dev/null || fail "tokenizer: from-hf"
"$@" -np 2 "$trident" train "${small[@]}" "${llama[@]}" --parallel.tp 2 --init.from "$out/tok.h5" --train.steps 1 \
  --checkpoint.dir "$out/tokrun" >"$out/tok.log" 2>&1 || { cat "$out/tok.log"; fail "tokenizer: init.from"; }
grep -q "tokenizer: init.from $out/tok.h5 (the checkpoints keep it)" "$out/tok.log" || { cat "$out/tok.log"; fail "no tokenizer line"; }
"$trident" inspect "$out/tok.h5" | grep -q "tokenizer kept: tokenizer.json ([0-9]* bytes) tokenizer_config.json" ||
  fail "tokenizer: inspect does not show the kept tokenizer"
"$@" -np 1 "$trident" train "${small[@]}" "${llama[@]}" --train.steps 2 --checkpoint.dir "$out/tokrun" >"$out/tok.log" 2>&1 ||
  { cat "$out/tok.log"; fail "tokenizer: resume"; }
"$@" -np 2 "$trident" convert --to-hf "$out/tokrun/step_2.h5" --out "$out/tok-out" >"$out/tok.log" 2>&1 ||
  { cat "$out/tok.log"; fail "tokenizer: to-hf"; }
grep -q "with the tokenizer" "$out/tok.log" || { cat "$out/tok.log"; fail "to-hf wrote no tokenizer"; }
for f in tokenizer.json tokenizer_config.json; do
  cmp -s "$tok/$f" "$out/tok-out/$f" || fail "tokenizer: $f did not come back unchanged"
done
grep -q '"bos_token_id": 257' "$out/tok-out/config.json" && grep -q '"eos_token_id": 256' "$out/tok-out/config.json" ||
  { cat "$out/tok-out/config.json"; fail "tokenizer: BOS/EOS ids not in config.json"; }
"$@" -np 1 "$trident" generate --checkpoint "$out/tokrun/step_2.h5" --prompt "hello" --max-new-tokens 3 \
  >"$out/tok.log" 2>&1 || { cat "$out/tok.log"; fail "tokenizer: generate"; }
head -1 "$out/tok.log" | grep -q "^hello" || { cat "$out/tok.log"; fail "generate did not use the kept tokenizer"; }
echo "ok   the tokenizer goes from-hf -> init.from -> resume -> to-hf unchanged, and generate uses it"
# A tokenizer trident cannot read (SentencePiece-style byte_fallback) does not stop the weights:
# kept and exported as it is, with a note, and no BOS/EOS ids in the configs.
cp -r "$out/llama-np1-hf1" "$out/sp-hf"
python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); t["model"]["byte_fallback"] = True
json.dump(t, open(sys.argv[2], "w"))' "$tok/tokenizer.json" "$out/sp-hf/tokenizer.json"
"$@" -np 1 "$trident" convert --from-hf "$out/sp-hf" --out "$out/sp.h5" >"$out/tok.log" 2>&1 ||
  { cat "$out/tok.log"; fail "a tokenizer trident cannot read stopped from-hf"; }
grep -q "note: kept as it is, but trident cannot use this tokenizer.*byte_fallback" "$out/tok.log" ||
  { cat "$out/tok.log"; fail "no note on the unreadable tokenizer"; }
"$@" -np 1 "$trident" convert --to-hf "$out/sp.h5" --out "$out/sp-out" >"$out/tok.log" 2>&1 ||
  { cat "$out/tok.log"; fail "to-hf with a kept unreadable tokenizer"; }
cmp -s "$out/sp-hf/tokenizer.json" "$out/sp-out/tokenizer.json" || fail "the unreadable tokenizer.json was not exported as it is"
grep -q '"bos_token_id": null' "$out/sp-out/config.json" || { cat "$out/sp-out/config.json"; fail "ids of an unreadable tokenizer"; }
echo "ok   a tokenizer trident cannot read is kept and exported as it is, with a note"
"$@" -np 1 "$trident" train "${small[@]}" --data.tokenizer "$tok" --train.steps 1 --checkpoint.dir "$out/tokdata" \
  >"$out/tok.log" 2>&1 || { cat "$out/tok.log"; fail "data.tokenizer"; }
"$@" -np 1 "$trident" convert --to-hf "$out/tokdata/step_1.h5" --out "$out/tokdata-out" >/dev/null || fail "to-hf of tokdata"
cmp -s "$tok/tokenizer.json" "$out/tokdata-out/tokenizer.json" || fail "data.tokenizer: tokenizer.json not exported"
"$@" -np 1 "$trident" train "${small[@]}" --data.tokenizer "$out/nothing" --train.steps 1 >"$out/tok.log" 2>&1
[[ $? == 2 ]] && grep -q "data.tokenizer: .*nothing.*no such file" "$out/tok.log" || { cat "$out/tok.log"; fail "bad data.tokenizer"; }
echo "ok   data.tokenizer: kept and exported; a missing one exits 2 naming the option"
echo "all checks passed"
