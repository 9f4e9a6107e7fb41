#!/usr/bin/env bash
# Run CB: the warp-specialized attention forward (attention_tma.cu: a TMA producer warpgroup, two
# consumer warpgroups with setmaxnreg, 128x128 tiles, next scores issued before this softmax,
# persistent blocks) against the single-warpgroup wgmma forward (TRIDENT_ATTENTION_KERNELS=wgmma,
# same binary). A quick forward test first (a hang stops the run), then cuda_tests (with the
# sampler fixes made after run CA), the attention rows of the kernel bench, alternating 124M runs.
#   docs/perf/raw/run_cb/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident
check smoke 60 "$b/bin/cuda_tests" --gtest_filter='CudaOps.AttentionFwd*'
if ! grep -q "PASSED" "$out/smoke.log"; then tail -40 "$out/smoke.log" >>"$out/summary.txt"; finish; exit 0; fi
check cuda_tests 300 "$b/bin/cuda_tests"
TRIDENT_ATTENTION_KERNELS=wgmma check cuda_attention_wgmma 120 "$b/bin/cuda_tests" --gtest_filter='CudaOps.Attention*'
check kernels_tma 200 "$bin" bench --bench.kernels
TRIDENT_ATTENTION_KERNELS=wgmma check kernels_wgmma 200 "$bin" bench --bench.kernels
for r in 1 2; do
  one g1_tma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
  TRIDENT_ATTENTION_KERNELS=wgmma one g1_wgmma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
done
traced t_tma 1 "$bin" "${m124[@]}" --train.global_batch_size 32
grep -H "attention" "$out"/kernels_*.log | tee -a "$out/summary.txt"
grep -h "FAILED\|Skipped\|DeviceSampling" "$out"/cuda_tests.log | head -20 >>"$out/summary.txt"
finish
