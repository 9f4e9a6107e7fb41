#!/usr/bin/env bash
# Run CC: the warp-specialized dK/dV kernel (attention_tma.cu: TMA producer thread plus a
# statistics warp, two consumer warpgroups of 64 keys each, 64-query stages, the next tile's
# s^T and dp^T issued before this tile's dV/dK products) with the run-CB forward, against the
# single-warpgroup wgmma kernels (TRIDENT_ATTENTION_KERNELS=wgmma, same binary). Quick attention
# tests first (a hang stops the run), then cuda_tests, the kernel bench, alternating 124M runs,
# PyTorch's baseline, one timeline.
#   docs/perf/raw/run_cc/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident
attention_first
check cuda_tests 300 "$b/bin/cuda_tests"
TRIDENT_ATTENTION_KERNELS=wgmma check cuda_attention_wgmma 120 "$b/bin/cuda_tests" --gtest_filter='CudaOps.Attention*'
check kernels_tma 200 "$bin" bench --bench.kernels
TRIDENT_ATTENTION_KERNELS=wgmma check kernels_wgmma 200 "$bin" bench --bench.kernels
for r in 1 2; do
  one g1_tma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
  TRIDENT_ATTENTION_KERNELS=wgmma one g1_wgmma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
  (( r == 1 )) && pytorch pytorch124m --batch 32 --seq 1024 --steps 20
done
traced t_tma 1 "$bin" "${m124[@]}" --train.global_batch_size 32
grep -H "attention" "$out"/kernels_*.log | tee -a "$out/summary.txt"
grep -h "FAILED\|rel_l2.*attention_bwd" "$out"/cuda_tests.log | head -30 >>"$out/summary.txt"
finish
