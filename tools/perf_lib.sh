# Shared by the GPU measurement scripts docs/perf/raw/run_*/run.sh (from run BO on; the earlier
# ones are kept as they ran): the environment of a GPU node running a bundle (tools/bundle.sh),
# the usual model arguments, and helpers that run one measurement and log one summary line.
#   source tools/perf_lib.sh BUNDLE OUT     (from the repository root)
# Then: one NAME RANKS BINARY BENCH_ARGS...   trident bench under mpirun; summary: tok/s, step ms,
#                                               comm wait, each rank's median SM clock. Exported TRIDENT_* variables, CUDA_INJECTION64_PATH and
#                                               CUDA_VISIBLE_DEVICES go along.
#       each_gpu NAME BINARY BENCH_ARGS...    `one` on 1 GPU, once on each GPU of the node (NAME_gpuN)
#       traced NAME RANKS BINARY BENCH_ARGS... `one` with a kernel timeline (tools/kernel_trace): the
#                                               summary of rank 0's idle time by kernel pair goes to
#                                               NAME_pairs.txt; the timelines are kept in OUT/NAME.tgz
#       check NAME LIMIT_S COMMAND...          any command; summary: its exit status and last line
#       attention_first                        cuda_tests' attention tests; on a failure the run
#                                               ends there, their errors in the summary
#       pytorch NAME ARGS...                   tools/bench_pytorch.py without the bundle's libraries
#       finish                                 packs the logs: OUT/logs.tgz and OUT/summary.txt
# The logs are written to a scratch folder ($out) until `finish`: the device tool brings back
# only a few files from OUT.
b=$(cd "${1:?usage: source tools/perf_lib.sh BUNDLE OUT}" && pwd)
dest=${2:?usage: source tools/perf_lib.sh BUNDLE OUT}
out=$(mktemp -d)
mkdir -p "$dest"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m124=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --bench.warmup 5 --bench.steps 30)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6)
split=(--parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true --parallel.tp_split_layernorm_bwd true)
z1=(--train.global_batch_size 64 --parallel.zero 1)

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
  local name=$1 n=$2 bin=$3 t0=$SECONDS pass=()
  shift 3
  for v in $(compgen -e | grep -E "^(TRIDENT_|CUDA_INJECTION64_PATH$|CUDA_VISIBLE_DEVICES$)"); do pass+=(-x "$v"); done
  timeout 150 "${mp[@]}" "${pass[@]}" -np "$n" "$bin" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(row "$out/$name.log") $(clocks "$out/$name.log") ($((SECONDS - t0)) s)" |
    tee -a "$out/summary.txt"
}

# `one` on each GPU of the node alone in turn (NAME_gpu0, NAME_gpu1, ...): a scaling ratio taken
# against one GPU's rate moves with which GPU that was (run BW: 2.6% apart on one pair).
each_gpu() {  # name, binary, bench arguments...
  local name=$1 bin=$2 g
  shift 2
  for ((g = 0; g < $(nvidia-smi -L | wc -l); ++g)); do CUDA_VISIBLE_DEVICES=$g one "${name}_gpu$g" 1 "$bin" "$@"; done
}

traced() {  # name, ranks, binary, bench arguments...
  local name=$1
  CUDA_INJECTION64_PATH="$b/lib/libtrident_kernel_trace.so" TRIDENT_KERNEL_TRACE="$out/$name" one "$@"
  local traces=("$out/$name".*.csv)
  [[ -e ${traces[0]} ]] || { echo "$name: no timeline written" | tee -a "$out/summary.txt"; return; }
  (unset LD_LIBRARY_PATH; timeout 120 python3 tools/kernel_trace/kernel_trace.py "$out/$name.0.csv" --top 40 --gaps 20 \
     --pairs 25 >"$out/${name}_pairs.txt" 2>&1)
  head -1 "$out/${name}_pairs.txt" | tee -a "$out/summary.txt"
  tar czf "$dest/$name.tgz" -C "$out" "${traces[@]##*/}" && rm -f "${traces[@]}"
}

check() {  # name, limit in seconds, command...
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(tail -1 "$out/$name.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}

# For runs that try an attention kernel: its tests first, so that a wrong or hanging kernel costs
# a minute and a half of device time, not the whole run's.
attention_first() {
  check smoke 90 "$b/bin/cuda_tests" --gtest_filter='CudaOps.Attention*'
  if ! grep -q "PASSED" "$out/smoke.log" || grep -q "FAILED" "$out/smoke.log"; then
    grep -B2 -A8 "Failure\|FAILED\|rel_l2" "$out/smoke.log" | tail -60 >>"$out/summary.txt"
    finish
    exit 0
  fi
}

pytorch() {  # name, bench_pytorch.py arguments...
  local name=$1 t0=$SECONDS
  shift
  (unset LD_LIBRARY_PATH; timeout 200 python3 tools/bench_pytorch.py "$@") >"$out/$name.log" 2>&1
  echo "$name: exit $? $(tail -1 "$out/$name.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}

nvidia-smi --query-gpu=name,memory.total,power.limit,clocks.max.sm --format=csv,noheader | tee "$out/gpus.txt"

finish() {
  tar czf "$dest/logs.tgz" -C "$out" .
  cp "$out/summary.txt" "$dest/"
}
