#!/usr/bin/env bash
# e2e: `trident bench` on a CPU rank prints its one-row table with every column (comm wait is
# n/a without a GPU profiler), and `--bench.profile` is accepted there; `--bench.kernels` prints
# the two measured ceilings and every kernel with its share of one.
#   bench_cpu.sh TRIDENT REPO_ROOT
set -uo pipefail
trident=$1 root=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$trident" bench --config "$root/inputs/models/tiny.cfg" --backend cpu --model.seq_len 32 \
  --train.micro_batch_size 2 --train.global_batch_size 2 --bench.warmup 1 --bench.steps 2 --bench.profile \
  >"$out/stdout" 2>"$out/stderr" || { echo "FAIL: exit $?"; cat "$out/stderr"; exit 1; }
cat "$out/stdout"
fail=0
header=$(grep -E '^model +layout' "$out/stdout")
for column in tokens/s "step ms" MFU "peak GiB/rank" "comm wait"; do
  [[ $header == *"$column"* ]] || { echo "FAIL: no '$column' column"; fail=1; }
done
row=$(grep -E '^L[0-9]+C[0-9]+ ' "$out/stdout")
[[ -n $row && $row == *"n/a"* ]] || { echo "FAIL: no table row with comm wait n/a"; fail=1; }
tokens=$(awk '{print $(NF-4)}' <<<"$row")   # columns from the right: tokens/s, step ms, MFU, peak, comm wait
[[ $tokens =~ ^[0-9]+$ && $tokens -gt 0 ]] || { echo "FAIL: tokens/s '$tokens'"; fail=1; }

# The preference tasks time their steps on random pairs (every target trained).
for task in dpo reward; do
  "$trident" bench --config "$root/inputs/models/llama-tiny.cfg" --backend cpu --task "$task" --model.seq_len 32 \
    --train.micro_batch_size 2 --train.global_batch_size 2 --bench.warmup 1 --bench.steps 2 >"$out/$task" 2>&1 ||
    { echo "FAIL: bench --task $task"; cat "$out/$task"; exit 1; }
  row=$(grep -E '^L[0-9]+C[0-9]+ ' "$out/$task")
  echo "$task: $row"
  tokens=$(awk '{print $(NF-4)}' <<<"$row")
  [[ $tokens =~ ^[0-9]+$ && $tokens -gt 0 ]] || { echo "FAIL: bench --task $task: tokens/s '$tokens'"; fail=1; }
done
"$trident" bench --backend cpu --bench.kernels >"$out/kernels" 2>"$out/stderr" ||
  { echo "FAIL: --bench.kernels exit $?"; cat "$out/stderr"; exit 1; }
cat "$out/kernels"
for ceiling in "ceiling: copy" "ceiling: GEMM"; do
  line=$(grep "^$ceiling" "$out/kernels")
  rate=$(awk '{print $NF}' <<<"$line")
  awk -v r="$rate" 'BEGIN {exit !(r > 0)}' || { echo "FAIL: no positive '$ceiling' rate ('$line')"; fail=1; }
done
for kernel in "attention fwd+bwd HS=64" "attention fwd+bwd HS=128" "layernorm fwd" "layernorm bwd" \
              "cross-entropy R=" "cross-entropy fused" "adamw" "rmsnorm fwd" "rmsnorm bwd" "swiglu fwd+bwd" \
              "rope fwd+bwd"; do
  awk -v k="$kernel" 'index($0, k) == 1 && $NF ~ /^[0-9]+%$/ {found = 1} END {exit !found}' "$out/kernels" ||
    { echo "FAIL: no '$kernel' row with a share of its ceiling"; fail=1; }
done
exit $fail
