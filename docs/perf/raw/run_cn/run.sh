#!/usr/bin/env bash
# Run CN (1 GPU): the one-kernel attention backward at HS 64 (default) against the two-kernel
# backward (TRIDENT_ATTENTION_KERNELS=split: the same warp-specialized forward, the dK/dV and dQ
# kernels) in the same binary. Attention tests first (a failure or hang stops the run), then
# cuda_tests, the split and wgmma kernel sets' attention tests, the kernel bench both ways,
# alternating 124M runs and a timeline of each.
#   docs/perf/raw/run_cn/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident
attention_first
check cuda_tests 300 "$b/bin/cuda_tests"
TRIDENT_ATTENTION_KERNELS=split check cuda_attention_split 120 "$b/bin/cuda_tests" --gtest_filter='CudaOps.Attention*'
TRIDENT_ATTENTION_KERNELS=wgmma check cuda_attention_wgmma 120 "$b/bin/cuda_tests" --gtest_filter='CudaOps.Attention*'
check kernels_fused 200 "$bin" bench --bench.kernels
TRIDENT_ATTENTION_KERNELS=split check kernels_split 200 "$bin" bench --bench.kernels
for r in 1 2; do
  one g1_fused_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
  TRIDENT_ATTENTION_KERNELS=split one g1_split_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
done
traced t_fused 1 "$bin" "${m124[@]}" --train.global_batch_size 32
TRIDENT_ATTENTION_KERNELS=split traced t_split 1 "$bin" "${m124[@]}" --train.global_batch_size 32
grep -H "attention" "$out"/kernels_*.log >>"$out/summary.txt"
grep -A4 "^_ZN7trident3gpu49_GLOBAL__N__.*attention" "$out"/t_*_pairs.txt | grep -v "idle" | tail -16 >>"$out/summary.txt"
finish
