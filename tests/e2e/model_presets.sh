#!/usr/bin/env bash
# e2e: every model preset in inputs/models validates and has a layout that fits 8 GPUs of 141 GiB;
# llama-16b needs the memory options on 4 GPUs of 80 GiB (what its header says).
#   model_presets.sh TRIDENT REPO_ROOT
set -euo pipefail
trident=$1 root=$2
for cfg in "$root"/inputs/models/*.cfg; do
  out=$("$trident" plan --config "$cfg" --gpus 8 --gpu-memory-gib 141 --backend cpu --top 1 2>&1) ||
    { echo "$cfg: trident plan failed: $out"; exit 1; }
  grep -q '^best: ' <<<"$out" || { echo "$cfg: no layout fits 8 x 141 GiB: $out"; exit 1; }
done
plan16=("$trident" plan --config "$root/inputs/models/llama-16b.cfg" --gpus 4 --gpu-memory-gib 80 --backend cpu --top 1)
if out=$("${plan16[@]}" 2>&1); then
  echo "llama-16b fits 4 x 80 GiB without memory options: $out"
  exit 1
fi
grep -q 'none of the .* valid layouts fits' <<<"$out" || { echo "llama-16b: unexpected plan output: $out"; exit 1; }
"${plan16[@]}" --parallel.recompute full 2>&1 | grep -q '^best: ' || { echo "llama-16b: no layout with full recompute"; exit 1; }
echo "every preset plans; llama-16b fits 4 x 80 GiB only with the memory options"
