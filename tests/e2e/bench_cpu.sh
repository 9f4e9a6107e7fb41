#!/usr/bin/env bash
# e2e: `trident bench` on a CPU rank prints its one-row table with every column (comm wait is
# n/a without a GPU profiler) and the memory line (planned, allocator peak, GPU-reported peak n/a),
# and `--bench.profile` is accepted there; `--bench.kernels` prints
# the two measured ceilings and every kernel with its share of one; `--bench.generate` prints one
# row per batch size with positive generation, prefill and forward rates (GPT-2 greedy, Llama sampled;
# with MPIRUN, also on 2 ranks at tp 2 and at dp 2).
#   bench_cpu.sh TRIDENT REPO_ROOT [MPIRUN ARGS...]
set -uo pipefail
trident=$1 root=$2
shift 2
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
# The planner's memory beside the measured peaks; no GPU-reported peak on a CPU rank.
memory=$(grep -E '^\(memory per rank: planned [0-9.]+ GiB = arenas [0-9.]+ \+ outside them 0\.000 .*allocator peak [0-9.]+ GiB; GPU-reported peak n/a' "$out/stdout")
[[ -n $memory ]] || { echo "FAIL: no memory line with the planned and allocator peaks and GPU peak n/a"; fail=1; }

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

# Generation against a plain forward: a row per batch size, every rate positive (no timing limits).
#   generate NAME LAYOUT LAUNCHER... -- BENCH ARGS...: LAYOUT is the row's "dpN tpM".
generate() {
  local name=$1 layout=$2 launcher=()
  shift 2
  while [[ $1 != -- ]]; do launcher+=("$1"); shift; done
  shift
  "${launcher[@]}" "$trident" bench --backend cpu --bench.generate --bench.gen_batches 1,3 --bench.gen_prompt_len 8 \
    --bench.gen_new_tokens 4 --train.micro_batch_size 2 "$@" >"$out/generate" 2>&1 ||
    { echo "FAIL: --bench.generate $name"; cat "$out/generate"; fail=1; return; }
  cat "$out/generate"
  header=$(grep -E '^model +layout +batch' "$out/generate")
  for column in "prompt+new" "gen tokens/s" "decode ms" "prefill tok/s" "forward tok/s" "gen/fwd" "1st run tok/s" \
                "GEMM plans"; do
    [[ $header == *"$column"* ]] || { echo "FAIL: --bench.generate $name: no '$column' column"; fail=1; }
  done
  for batch in 1 3; do
    # Fields: model, layout (2), batch, prompt+new, then the six rates and the plan count (0 on a CPU).
    awk -v b="$batch" -v layout="$layout" '/^L[0-9]+C[0-9]+ / && $2 " " $3 == layout && $4 == b && $5 == "8+4" &&
        NF == 12 {
        for (i = 6; i <= 11; ++i) if (!($i + 0 > 0)) bad = 1
        if ($12 != "0") bad = 1
        found = 1 } END {exit bad || !found}' "$out/generate" ||
      { echo "FAIL: --bench.generate $name: no $layout batch $batch row with positive rates"; fail=1; }
  done
}
generate "gpt2 greedy" "dp1 tp1" -- --config "$root/inputs/models/tiny.cfg"
generate "llama sampled" "dp1 tp1" -- --config "$root/inputs/models/llama-tiny.cfg" --bench.gen_temperature 0.8
if (($# > 0)); then
  generate "tp 2" "dp1 tp2" "$@" -np 2 -- --config "$root/inputs/models/llama-tiny.cfg" --parallel.tp 2
  generate "dp 2" "dp2 tp1" "$@" -np 2 -- --config "$root/inputs/models/tiny.cfg"
fi
"$trident" bench --backend cpu --bench.generate --bench.gen_batches 1,0 >"$out/bad" 2>&1
status=$?
[[ $status == 2 && $(wc -l <"$out/bad") == 1 ]] && grep -q "bench.gen_batches" "$out/bad" ||
  { echo "FAIL: --bench.gen_batches 1,0: exit $status, expected 2 and one line naming the option"; cat "$out/bad"; fail=1; }
exit $fail
