#!/usr/bin/env bash
# Run CL: the warp-specialized forward after a review (bin/trident): operand fences before each
# wgmma.fence (the softmax's writes to the scores, the rescaled output and the packed
# probabilities may not be scheduled between the fence and the products), the register check
# as a fallback to the single-warpgroup forward instead of an abort, tensor maps returned by
# value; against 94f78de (bin/trident_head). Attention tests first, cuda_tests, alternating
# 124M runs, timelines.
#   docs/perf/raw/run_cl/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident head=$b/bin/trident_head
attention_first
check cuda_tests 300 "$b/bin/cuda_tests"
for r in 1 2; do
  for v in bin head; do one g1_${v}_$r 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
done
for v in bin head; do traced t_$v 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
grep -H "^_ZN.*attention_tma" "$out"/t_*_pairs.txt >>"$out/summary.txt"
finish
