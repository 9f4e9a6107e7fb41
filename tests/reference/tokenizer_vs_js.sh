#!/usr/bin/env bash
# trident's GPT-2 tokenizer against GPT-2's JS reference encoder: the ids `trident tokenize`
# writes must equal Encoder.js's on the fortunes corpus and on adversarial strings, and
# decode(encode(x)) must give x back. Prints the first mismatch and fails if anything differs.
#   tokenizer_vs_js.sh TRIDENT TOKENIZER_ROUNDTRIP WORKDIR
# Exits 77 (ctest: skipped) when node or npm is missing.
set -euo pipefail

trident=$1
roundtrip=$2
work=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

source "$here/js_prereqs.sh"

mkdir -p "$work"
gpt2="$work/gpt2"
"$root/tools/fetch_gpt2_tokenizer.sh" "$gpt2"
tok=(--tokenizer gpt2 --vocab "$gpt2/encoder.json" --merges "$gpt2/vocab.bpe")

# (a) the fortunes corpus, documents split at "%" lines, each ended by <|endoftext|>
corpus=()
for f in "$fortunes_dir"/*; do
  [[ -f $f && ! -L $f && $f != *.dat && $f != *.u8 ]] && corpus+=("$f")
done
"$trident" tokenize --input "${corpus[@]}" --doc-separator % --output "$work/fortunes" "${tok[@]}"
node "$here/tokenizer_vs_js.js" compare "$gpt2" "$work/fortunes" eot text-separated % "${corpus[@]}"

# (b) adversarial strings, one JSON line each, no <|endoftext|> appended
node "$here/tokenizer_vs_js.js" cases "$work/cases.jsonl"
"$trident" tokenize --input "$work/cases.jsonl" --format jsonl --append-eot=false --output "$work/cases" "${tok[@]}"
node "$here/tokenizer_vs_js.js" compare "$gpt2" "$work/cases" no-eot jsonl "$work/cases.jsonl"

# decode(encode(x)) == x on both, and on invalid UTF-8 (which the JS reference cannot take)
"$roundtrip" "$gpt2/encoder.json" "$gpt2/vocab.bpe" "$work/cases.jsonl" "${corpus[@]}"
echo "tokenizer_vs_js: PASS"
