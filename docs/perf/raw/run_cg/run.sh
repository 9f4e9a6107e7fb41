#!/usr/bin/env bash
# Run CG: the warp-specialized dK/dV kernel with the softmax statistics as bulk copies issued by
# the producer's one thread (run CF's profile: the ALU pipe busiest at 58.5%, issue slots 54%
# busy, with three statistics warps beside the consumers; now the producer warpgroup keeps one
# thread). K, V read from shared memory as in run CD. Attention tests first, cuda_tests,
# alternating 124M runs against the single-warpgroup kernels, a timeline, Nsight Compute.
#   docs/perf/raw/run_cg/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident
attention_first
check cuda_tests 300 "$b/bin/cuda_tests"
for r in 1 2; do
  one g1_tma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
  TRIDENT_ATTENTION_KERNELS=wgmma one g1_wgmma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
done
traced t_tma 1 "$bin" "${m124[@]}" --train.global_batch_size 32
grep "^_ZN.*attention" "$out"/t_tma_pairs.txt >>"$out/summary.txt"
timeout 240 /usr/local/cuda/bin/ncu -k regex:attention_dkv_tma --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis "$bin" bench \
  --config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size 32 --bench.warmup 1 \
  --bench.steps 1 >"$dest/ncu_dkv_tma.txt" 2>&1
finish
