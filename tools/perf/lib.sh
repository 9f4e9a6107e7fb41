# shellcheck shell=bash
# Helpers of tools/perf/run.sh: the environment of a GPU node running a bundle (tools/bundle.sh),
# the model arguments of the measured numbers, and functions that run one measurement and log one
# summary line. An A/B script of its own can source it the same way:
#   source tools/perf/lib.sh BUNDLE OUT
# Then: one NAME RANKS BINARY BENCH_ARGS...   trident bench under mpirun; summary: tok/s, step ms,
#                                               comm wait, each rank's median SM clock. Exported
#                                               TRIDENT_* variables, CUDA_INJECTION64_PATH and
#                                               CUDA_VISIBLE_DEVICES go along.
#       each_gpu NAME BINARY BENCH_ARGS...    `one` on 1 GPU, once on each GPU of the node (NAME_gpuN)
#       traced NAME RANKS BINARY BENCH_ARGS... `one` with a kernel timeline (tools/perf/kernel_trace):
#                                               rank 0's idle time by kernel pair goes to
#                                               NAME_pairs.txt; the timelines to OUT/NAME.tgz
#       check NAME LIMIT_S COMMAND...          any command; summary: its exit status and last line
#       pytorch NAME GPUS ARGS...              bench_pytorch.py without the bundle's libraries
#                                               (under torchrun where GPUS > 1)
#       finish                                 packs the logs into OUT/logs.tgz, keeps OUT/summary.txt
# A nonzero exit of any of them sets `status` to 1. Logs go to OUT/logs until `finish`, which packs
# them into one file (a GPU lease often brings back only a few files).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
b=$(cd "${1:?usage: source tools/perf/lib.sh BUNDLE OUT}" && pwd)
dest=${2:?usage: source tools/perf/lib.sh BUNDLE OUT}
out=$dest/logs
mkdir -p "$out"
status=0
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
# GPT-2 124M at B 32, T 1024; add --train.global_batch_size 32 x GPUs.
m124=(--config "$root/inputs/models/gpt2-124m.cfg" --train.micro_batch_size 32 --bench.warmup 5 --bench.steps 30)
# The 1.44B GPT-2 1.5B-class shape that tp = 2 can split, B 8, global batch 64.
m15=(--config "$root/inputs/models/gpt2-1.5b-tp.cfg" --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6)
# The fastest tp = 2 settings: forward in two half micro-batches, partial sums by copy engine,
# the backward's LayerNorms on half the rows.
split=(--parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true --parallel.tp_split_layernorm_bwd true)
# dp = 2 with ZeRO-1 (NCCL's reduce-scatter and all-gathers).
z1=(--train.global_batch_size 64 --parallel.zero 1)

mark() { (( $1 == 0 )) || status=1; }

row() { grep -A1 '^model' "$1" | tail -1 | awk '{print $9, $10, $NF}'; }
# Each rank's median SM clock over the timed steps from trident bench's NVML line, as
# "SM a/b MHz"; beyond 8 ranks the bench prints the min / median / max of the ranks' medians,
# given as "SM min/median/max a/b/c MHz".
clocks() {
  local line mhz
  line=$(grep -m1 '^(GPU during the timed steps' "$1") || return 0
  if [[ $line =~ SM\ ([0-9]+)\ /\ ([0-9]+)\ /\ ([0-9]+)\ MHz ]]; then
    echo "SM min/median/max ${BASH_REMATCH[1]}/${BASH_REMATCH[2]}/${BASH_REMATCH[3]} MHz"
    return 0
  fi
  mhz=$(grep -o 'SM [0-9]* MHz' <<<"$line" | awk '{print $2}' | paste -sd/)
  [[ -n $mhz ]] && echo "SM $mhz MHz"
}

one() {  # name, ranks, binary, bench arguments...
  local name=$1 n=$2 bin=$3 t0=$SECONDS pass=() rc
  shift 3
  for v in $(compgen -e | grep -E "^(TRIDENT_|CUDA_INJECTION64_PATH$|CUDA_VISIBLE_DEVICES$)"); do pass+=(-x "$v"); done
  timeout 300 "${mp[@]}" "${pass[@]}" -np "$n" "$bin" bench "$@" >"$out/$name.log" 2>&1
  rc=$?
  mark $rc
  echo "$name: exit $rc $(row "$out/$name.log") $(clocks "$out/$name.log") ($((SECONDS - t0)) s)" |
    tee -a "$dest/summary.txt"
}

# `one` on each GPU of the node alone in turn (NAME_gpu0, NAME_gpu1, ...): under the 700 W cap the
# GPUs of one node differ by up to 2.6% alone, so a scaling ratio must name the GPU of its baseline.
each_gpu() {  # name, binary, bench arguments...
  local name=$1 bin=$2 g
  shift 2
  for ((g = 0; g < $(nvidia-smi -L | wc -l); ++g)); do CUDA_VISIBLE_DEVICES=$g one "${name}_gpu$g" 1 "$bin" "$@"; done
}

traced() {  # name, ranks, binary, bench arguments...
  local name=$1
  CUDA_INJECTION64_PATH="$b/lib/libtrident_kernel_trace.so" TRIDENT_KERNEL_TRACE="$out/$name" one "$@"
  local traces=("$out/$name".*.csv)
  [[ -e ${traces[0]} ]] || { echo "$name: no timeline written" | tee -a "$dest/summary.txt"; status=1; return; }
  (unset LD_LIBRARY_PATH; timeout 120 python3 "$root/tools/perf/kernel_trace/kernel_trace.py" "$out/$name.0.csv" \
     --top 40 --gaps 20 --pairs 25 >"$out/${name}_pairs.txt" 2>&1)
  head -1 "$out/${name}_pairs.txt" | tee -a "$dest/summary.txt"
  tar czf "$dest/$name.tgz" -C "$out" "${traces[@]##*/}" && rm -f "${traces[@]}"
}

check() {  # name, limit in seconds, command...
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  mark $rc
  echo "$name: exit $rc $(tail -1 "$out/$name.log") ($((SECONDS - t0)) s)" | tee -a "$dest/summary.txt"
}

# PyTorch runs on its own CUDA libraries, so the bundle's are taken off its path.
pytorch() {  # name, GPUs, bench_pytorch.py arguments...
  local name=$1 n=$2 t0=$SECONDS rc launcher=(python3)
  shift 2
  (( n > 1 )) && launcher=(torchrun --nproc_per_node "$n")
  (unset LD_LIBRARY_PATH; timeout 300 "${launcher[@]}" "$root/tools/perf/bench_pytorch.py" "$@") >"$out/$name.log" 2>&1
  rc=$?
  mark $rc
  echo "$name: exit $rc $(tail -1 "$out/$name.log") ($((SECONDS - t0)) s)" | tee -a "$dest/summary.txt"
}

finish() {
  tar czf "$dest/logs.tgz" -C "$out" . && rm -rf "$out"
}

nvidia-smi --query-gpu=name,memory.total,power.limit,clocks.max.sm,driver_version --format=csv,noheader |
  tee "$dest/gpus.txt"
