#!/usr/bin/env bash
# Run CA: trident bench now prints each rank's SM clock, power and temperature over the timed
# steps (NVML, sampled in the background; run BW showed the clock moving every rate under the
# power cap), and perf_lib's summary lines carry the clocks. cuda_tests (with the new
# DeviceSamplingReadsClockAndPower), then the 124M step on GPU 0, on GPU 1, and dp2.
#   docs/perf/raw/run_ca/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
new=$b/bin/trident
check cuda_tests 300 "$b/bin/cuda_tests"
one g1_gpu0 1 "$new" "${m124[@]}" --train.global_batch_size 32
CUDA_VISIBLE_DEVICES=1 one g1_gpu1 1 "$new" "${m124[@]}" --train.global_batch_size 32
one dp2 2 "$new" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
grep -h "^(GPU" "$out"/g1_gpu0.log "$out"/dp2.log | tee -a "$out/summary.txt"
finish
