#!/usr/bin/env bash
# Run CI: the warp-specialized forward of run CB (bin/trident_head, 94f78de) against two changes
# to it (bin/trident): the first consumer group's diagonal tile computed on its 64 visible keys
# only (m64n64 scores, half the P V slices), and wgmma descriptors built once and advanced by
# additions in the loop (fewer integer instructions beside the softmax). Attention tests first,
# cuda_tests, the kernel bench, alternating 124M runs, a timeline.
#   docs/perf/raw/run_ci/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident head=$b/bin/trident_head
attention_first
check cuda_tests 300 "$b/bin/cuda_tests"
for v in bin head; do check kernels_$v 200 "${!v}" bench --bench.kernels; done
for r in 1 2; do
  for v in bin head; do one g1_${v}_$r 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
done
for v in bin head; do traced t_$v 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
grep -H "^_ZN.*attention_tma" "$out"/t_*_pairs.txt >>"$out/summary.txt"
grep -H "attention fwd" "$out"/kernels_*.log >>"$out/summary.txt"
finish
