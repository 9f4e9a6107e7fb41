#!/usr/bin/env bash
# The planner's memory per rank against the peak the GPU reports (cudaMemGetInfo: CUDA context,
# NCCL buffers, cuBLASLt workspace and trident's arenas) over a set of layouts, one table row each,
# from `trident bench`'s memory line. A configuration that fails or needs more GPUs than are
# visible gets a row saying so; the others still run. docs/OPERATIONS.md ("Checking the memory
# estimate") describes the terms and the target (within 10%).
#   tools/perf/plan_vs_peak.sh TRIDENT [OUT_DIR] [--backend cpu] [--only NAME]...
# TRIDENT: the trident binary (a bundle's bin/trident: its lib/ goes on LD_LIBRARY_PATH). OUT_DIR
# (default: a new temporary directory) keeps each run's log and table.txt. --backend cpu runs the
# same layouts on tiny models on CPU ranks (no GPU column: the check of the script and of the
# arena terms). Exit status 1 when any configuration failed, 2 on bad arguments.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
usage() { echo "usage: tools/perf/plan_vs_peak.sh TRIDENT [OUT_DIR] [--backend cpu] [--only NAME]..." >&2; exit 2; }
[[ $# -ge 1 ]] || usage
trident=$1
shift
[[ -x $trident ]] || { echo "plan_vs_peak.sh: TRIDENT = $trident is not an executable; give the trident binary" >&2; exit 2; }
out="" cpu=0 only=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --backend) [[ ${2:-} == cpu ]] || { echo "plan_vs_peak.sh: --backend takes only 'cpu'" >&2; exit 2; }; cpu=1; shift 2 ;;
    --only) [[ -n ${2:-} ]] || usage; only+=("$2"); shift 2 ;;
    -*) echo "plan_vs_peak.sh: unknown option $1" >&2; usage ;;
    *) [[ -z $out ]] || usage; out=$1; shift ;;
  esac
done
[[ -n $out ]] || out=$(mktemp -d)
mkdir -p "$out" || { echo "plan_vs_peak.sh: cannot create OUT_DIR $out" >&2; exit 2; }

# A bundle's own libraries (NCCL, MPI) first; NVLink SHARP off, as in tools/perf/lib.sh: its
# multicast buffers are not in the planner's NCCL term.
export NCCL_NVLS_ENABLE=0
bundle_lib="$(cd "$(dirname "$trident")/.." && pwd)/lib"
export LD_LIBRARY_PATH="$bundle_lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x OMP_NUM_THREADS)
gpus=0
if ((!cpu)) && command -v nvidia-smi >/dev/null; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); fi

m=$root/inputs/models
bench=(--bench.warmup 2 --bench.steps 3 --bench.profile_steps 0)
# name | ranks | bench arguments. Each sized for about 20 s on one H100 or H200 (5 steps).
if ((cpu)); then
  small=(--backend cpu --model.seq_len 64)
  configs=(
    "gpt2_1rank|1|--config $m/tiny.cfg ${small[*]} --train.micro_batch_size 4 --train.global_batch_size 4"
    "llama_1rank|1|--config $m/llama-tiny.cfg ${small[*]} --train.micro_batch_size 4 --train.global_batch_size 4"
    "llama_selective|1|--config $m/llama-tiny.cfg ${small[*]} --train.micro_batch_size 4 --train.global_batch_size 4 --parallel.recompute selective"
    "llama_dp2_zero1|2|--config $m/llama-tiny.cfg ${small[*]} --train.micro_batch_size 2 --train.global_batch_size 4 --parallel.zero 1"
    "llama_tp2_sp|2|--config $m/llama-tiny.cfg ${small[*]} --train.micro_batch_size 4 --train.global_batch_size 4 --parallel.tp 2 --parallel.sequence_parallel true"
    "llama_offload|1|--config $m/llama-tiny.cfg ${small[*]} --train.micro_batch_size 4 --train.global_batch_size 4 --parallel.offload_optimizer true"
    "gpt2_pp2|2|--config $m/tiny.cfg ${small[*]} --train.micro_batch_size 2 --train.global_batch_size 8 --parallel.pp 2"
  )
else
  configs=(
    "gpt2_124m_B32|1|--config $m/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size 32"
    "llama1b_B4|1|--config $m/llama3.2-1b.cfg --train.micro_batch_size 4 --train.global_batch_size 4"
    "llama1b_B8_selective|1|--config $m/llama3.2-1b.cfg --train.micro_batch_size 8 --train.global_batch_size 8 --parallel.recompute selective"
    "llama1b_dp2_zero1|2|--config $m/llama3.2-1b.cfg --train.micro_batch_size 4 --train.global_batch_size 8 --parallel.zero 1"
    "llama1b_tp2_sp|2|--config $m/llama3.2-1b.cfg --train.micro_batch_size 8 --train.global_batch_size 8 --parallel.tp 2 --parallel.sequence_parallel true"
    "llama1b_B4_offload|1|--config $m/llama3.2-1b.cfg --train.micro_batch_size 4 --train.global_batch_size 4 --parallel.offload_optimizer true"
    "gpt2_774m_pp2|2|--config $m/gpt2-774m.cfg --train.micro_batch_size 8 --train.global_batch_size 32 --parallel.pp 2"
  )
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$( ((cpu)) && echo 1 || echo 16)}   # the host AdamW's threads under offload

selected() {
  [[ ${#only[@]} -eq 0 ]] && return 0
  local o
  for o in "${only[@]}"; do [[ $o == "$1" ]] && return 0; done
  return 1
}

# "a b" -> 100 (a - b) / b with one decimal, or "-" where b is not a positive number.
error_pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0 && a != "-") printf "%+.1f", 100 * (a - b) / b; else print "-" }'; }

table=$out/table.txt
header=$(printf '%-22s %5s %9s %9s %7s | %9s %9s %7s | %8s %8s | %s' config ranks plan_GiB gpu_GiB err% \
  arena_plan arena_peak err% out_plan out_gpu status)
echo "$header" | tee "$table"
status=0
for entry in "${configs[@]}"; do
  IFS='|' read -r name ranks args <<<"$entry"
  selected "$name" || continue
  if ((!cpu && ranks > gpus)); then
    printf '%-22s %5s %s\n' "$name" "$ranks" "skipped: needs $ranks GPUs, $gpus visible" | tee -a "$table"
    continue
  fi
  log=$out/$name.log
  # shellcheck disable=SC2086  # args is a list of words by construction
  timeout 600 "${mp[@]}" -np "$ranks" "$trident" bench $args "${bench[@]}" >"$log" 2>&1
  rc=$?
  line=$(grep -m1 '^(memory per rank: planned' "$log")
  if [[ $rc -ne 0 || -z $line ]]; then
    status=1
    printf '%-22s %5s %s\n' "$name" "$ranks" "FAILED (exit $rc): $(grep -Ev '^[-[:space:]]*$' "$log" | tail -1 | cut -c1-120)" |
      tee -a "$table"
    continue
  fi
  re='planned ([0-9.]+) GiB = arenas ([0-9.]+) \+ outside them ([0-9.]+) .*allocator peak ([0-9.]+) GiB; GPU-reported peak ([0-9.]+|n/a)'
  [[ $line =~ $re ]] || { status=1; printf '%-22s %5s %s\n' "$name" "$ranks" "FAILED: unreadable memory line" | tee -a "$table"; continue; }
  plan=${BASH_REMATCH[1]} arenas=${BASH_REMATCH[2]} outside=${BASH_REMATCH[3]} alloc=${BASH_REMATCH[4]} gpu=${BASH_REMATCH[5]}
  [[ $gpu == n/a ]] && gpu=-
  # Measured outside the arenas: the GPU's use beyond the allocator's peak.
  out_gpu=-
  [[ $gpu == - ]] || out_gpu=$(awk -v g="$gpu" -v a="$alloc" 'BEGIN { printf "%.3f", g - a }')
  printf '%-22s %5s %9s %9s %7s | %9s %9s %7s | %8s %8s | %s\n' "$name" "$ranks" "$plan" "$gpu" \
    "$(error_pct "$plan" "$gpu")" "$arenas" "$alloc" "$(error_pct "$arenas" "$alloc")" "$outside" "$out_gpu" ok |
    tee -a "$table"
done
echo "(GiB per rank, largest rank; err% = 100 (planned - measured) / measured; out_gpu = GPU-reported - allocator peak;" \
  "logs and this table in $out)" | tee -a "$table"
exit $status
