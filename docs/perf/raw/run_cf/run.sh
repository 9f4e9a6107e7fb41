#!/usr/bin/env bash
# Run CF: Nsight Compute on the attention kernels of one 124M step (B 32, layer 2's launch):
# the warp-specialized forward and dK/dV (K, V from shared memory: bin/trident_ss) against the
# single-warpgroup dK/dV (TRIDENT_ATTENTION_KERNELS=wgmma): throughput, warp states, scheduler.
#   docs/perf/raw/run_cf/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
ss=$b/bin/trident_ss
sections=(--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis
          --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy)
args=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size 32 --bench.warmup 1
      --bench.steps 1)
prof() {  # name, kernel regex, binary...
  local name=$1 k=$2
  shift 2
  timeout 240 /usr/local/cuda/bin/ncu -k "regex:$k" --launch-skip 2 --launch-count 1 "${sections[@]}" "$@" \
    >"$out/$name.txt" 2>&1
  echo "$name: exit $?" | tee -a "$out/summary.txt"
}
prof ncu_dkv_tma attention_dkv_tma "$ss" bench "${args[@]}"
prof ncu_fwd_tma attention_fwd_tma "$ss" bench "${args[@]}"
TRIDENT_ATTENTION_KERNELS=wgmma prof ncu_dkv_mma attention_dkv_mma "$ss" bench "${args[@]}"
cp "$out"/ncu_*.txt "$dest/"
finish
