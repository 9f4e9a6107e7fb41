#!/usr/bin/env bash
# Run CQ (1 GPU): the warp-specialized dQ kernel at HS 64 after run CP, now also forming P while
# dP and the previous dQ product run (split waits); as CP, issuing the next
# tile's S and dP before this tile's dQ product (default), against the single-warpgroup
# dQ kernel (TRIDENT_ATTENTION_KERNELS=fwd_tma: the same binary with the twelfth session's
# kernels). Attention tests first (a failure or hang stops the run), then cuda_tests, the other
# kernel sets' attention tests, the kernel bench both ways, alternating 124M runs and a timeline
# of each.
#   docs/perf/raw/run_cq/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident
attention_first
check cuda_tests 300 "$b/bin/cuda_tests"
for k in fwd_tma wgmma mma; do
  TRIDENT_ATTENTION_KERNELS=$k check cuda_attention_$k 120 "$b/bin/cuda_tests" --gtest_filter='CudaOps.Attention*'
done
check kernels_dq_tma 200 "$bin" bench --bench.kernels
TRIDENT_ATTENTION_KERNELS=fwd_tma check kernels_fwd_tma 200 "$bin" bench --bench.kernels
for r in 1 2; do
  one g1_dq_tma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
  TRIDENT_ATTENTION_KERNELS=fwd_tma one g1_fwd_tma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
done
traced t_dq_tma 1 "$bin" "${m124[@]}" --train.global_batch_size 32
TRIDENT_ATTENTION_KERNELS=fwd_tma traced t_fwd_tma 1 "$bin" "${m124[@]}" --train.global_batch_size 32
grep -H "attention" "$out"/kernels_*.log >>"$out/summary.txt"
grep -A60 "^kernel" "$out"/t_*_pairs.txt | grep -i "attention" >>"$out/summary.txt"
finish
