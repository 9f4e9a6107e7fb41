#!/usr/bin/env bash
# Run BW: (1) what keeping GEMM results bitwise costs: TRIDENT_GEMM_LOG=1 now also times the
# cuBLASLt candidates the autotuner may not use (another K split, other result bits); the 124M
# step's shapes, logged. (2) Why each op of the dp2 step runs 2-5% slower than on 1 GPU (ninth
# session): SM clock, power and temperature of both GPUs sampled every 200 ms during 1-GPU runs
# on GPU 0 and on GPU 1 and during the dp2 (ZeRO-1, copy engines) run, longer runs than usual.
#   docs/perf/raw/run_bw/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
new=$b/bin/trident
check cuda_tests 300 "$b/bin/cuda_tests"
TRIDENT_GEMM_LOG=1 one gemm_log 1 "$new" "${m124[@]}" --train.global_batch_size 32
long=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --bench.warmup 5 --bench.steps 150)
sampled() {  # name, then what `one` takes
  local name=$1
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
    --format=csv,noheader -lms 200 >"$out/${name}_smi.csv" &
  local smi=$!
  one "$@"
  kill $smi; wait $smi 2>/dev/null
  (unset LD_LIBRARY_PATH; python3 - "$out/${name}_smi.csv" <<'PY'
import sys, statistics
rows = [l.split(', ') for l in open(sys.argv[1]) if l.strip()]
for gpu in sorted({r[1] for r in rows}):
    busy = [r for r in rows if r[1] == gpu and int(r[6].split()[0]) > 50]
    if not busy: print(f"  gpu {gpu}: idle"); continue
    sm = [int(r[2].split()[0]) for r in busy]; pw = [float(r[4].split()[0]) for r in busy]
    print(f"  gpu {gpu}: {len(busy)} busy samples, SM MHz median {statistics.median(sm)} "
          f"(p10 {sorted(sm)[len(sm)//10]}), power median {statistics.median(pw):.0f} W, temp {busy[-1][5]} C")
PY
  ) | tee -a "$out/summary.txt"
}
for r in 1 2; do
  sampled g1_gpu0_$r 1 "$new" "${long[@]}" --train.global_batch_size 32
  CUDA_VISIBLE_DEVICES=1 sampled g1_gpu1_$r 1 "$new" "${long[@]}" --train.global_batch_size 32
  sampled dp2_$r 2 "$new" "${long[@]}" "${z1[@]}" --parallel.dp_copy_engine true
done
finish
