#!/usr/bin/env bash
# Builds OUTDIR/fortunes_byte.{bin,idx}: byte tokens of Debian's fortunes files, one document per
# fortune (split at "%" lines). The tiny preset trains on it (data.train = data/fortunes_byte).
# With "gpt2", builds OUTDIR/fortunes_gpt2.{bin,idx} instead (GPT-2 tokens, for the gpt2-*
# presets), fetching the tokenizer files into OUTDIR/gpt2 first.
#   tools/prepare_fortunes.sh TRIDENT_BINARY OUTDIR [byte|gpt2]
# Idempotent: does nothing while both outputs exist and are newer than every input file.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 || ! ${3:-byte} =~ ^(byte|gpt2)$ ]]; then
  echo "usage: tools/prepare_fortunes.sh TRIDENT_BINARY OUTDIR [byte|gpt2]" >&2
  exit 2
fi
trident=$1
out=$2
tokenizer=${3:-byte}
src=/usr/share/games/fortunes
prefix="$out/fortunes_$tokenizer"

# The text files only: *.dat are strfile indexes and *.u8 are symlinks to the same texts.
inputs=()
if [[ -d $src ]]; then
  for f in "$src"/*; do
    [[ -f $f && ! -L $f && $f != *.dat && $f != *.u8 ]] && inputs+=("$f")
  done
fi
if [[ ${#inputs[@]} -eq 0 ]]; then
  echo "prepare_fortunes: no fortune files in $src; install Debian's fortunes package" \
       "(tools/install_deps.sh, or apt-get install fortunes)" >&2
  exit 1
fi

if [[ -f $prefix.bin && -f $prefix.idx ]]; then
  stale=0
  for f in "${inputs[@]}"; do
    if [[ $f -nt $prefix.bin || $f -nt $prefix.idx ]]; then
      stale=1
      break
    fi
  done
  if [[ $stale -eq 0 ]]; then
    echo "prepare_fortunes: $prefix.{bin,idx} is up to date"
    exit 0
  fi
fi

if [[ ! -x $trident ]]; then
  echo "prepare_fortunes: $trident is not an executable; build trident first (make build)" >&2
  exit 1
fi
mkdir -p "$out"
tok=(--tokenizer "$tokenizer")
if [[ $tokenizer == gpt2 ]]; then
  "$(dirname "$0")/fetch_gpt2_tokenizer.sh" "$out/gpt2"
  tok+=(--vocab "$out/gpt2/encoder.json" --merges "$out/gpt2/vocab.bpe")
fi
"$trident" tokenize --input "${inputs[@]}" --doc-separator % "${tok[@]}" --output "$prefix"
