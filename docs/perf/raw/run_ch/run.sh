#!/usr/bin/env bash
# Run CH: ping-pong between the two consumer warpgroups of both warp-specialized kernels (named
# barriers: a group issues its products only in its turn, so one group's exponentials run while
# the other's products occupy the tensor cores); the dK/dV kernel back to run CD's (statistics
# warps, K and V from shared memory). Attention tests first, cuda_tests, the kernel bench,
# alternating 124M runs against the single-warpgroup kernels, a timeline.
#   docs/perf/raw/run_ch/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident
attention_first
check cuda_tests 300 "$b/bin/cuda_tests"
check kernels_tma 200 "$bin" bench --bench.kernels
TRIDENT_ATTENTION_KERNELS=wgmma check kernels_wgmma 200 "$bin" bench --bench.kernels
for r in 1 2; do
  one g1_tma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
  TRIDENT_ATTENTION_KERNELS=wgmma one g1_wgmma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
done
traced t_tma 1 "$bin" "${m124[@]}" --train.global_batch_size 32
grep "^_ZN.*attention" "$out"/t_tma_pairs.txt >>"$out/summary.txt"
grep -H "attention" "$out"/kernels_*.log >>"$out/summary.txt"
finish
