#!/usr/bin/env bash
# Run CK: the warp-specialized forward's blocks take their work items in a snake order (block i
# the i-th item of even rounds, the i-th from the end of odd ones; items sorted longest first),
# against run CB's round-robin (bin/trident_head, 94f78de): in run CJ the kernel bench's B 8
# shape ran 215.5 TFLOP/s against the single-warpgroup forward's 242.4 (run CB), where 768 items
# over 132 blocks leave the longest block with 30 tiles against an average of 26.2.
# Attention tests first, the kernel bench twice, alternating 124M runs, timelines.
#   docs/perf/raw/run_ck/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident head=$b/bin/trident_head
attention_first
for r in 1 2; do for v in bin head; do check kernels_${v}_$r 200 "${!v}" bench --bench.kernels; done; done
TRIDENT_ATTENTION_KERNELS=wgmma check kernels_wgmma 200 "$bin" bench --bench.kernels
for r in 1 2; do
  for v in bin head; do one g1_${v}_$r 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
done
for v in bin head; do traced t_$v 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
grep -H "^_ZN.*attention_tma" "$out"/t_*_pairs.txt >>"$out/summary.txt"
grep -H "attention fwd" "$out"/kernels_*.log >>"$out/summary.txt"
finish
