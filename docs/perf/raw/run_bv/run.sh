#!/usr/bin/env bash
# Run BV: run BU's timelines showed the delta -> dK/dV gap (38 us per layer) unchanged by the
# side stream's lower priority: the fc bias gradient's column-sum kernel put 1,024 blocks of 256
# threads (one wave, every SM's thread slots) that each ran ~40-60 us just before the attention
# backward, and running blocks are not preempted. Now its blocks are 8 warps over 64 rows of one
# 256-column slice (8 rows per thread), a few microseconds each. Binaries: bin/trident_base
# (7ec2109); bin/trident_pc (priorities + short column blocks); bin/trident (the same + the
# gradients' zeroing on the side stream beside the forward). Compared by the timelines' windows
# (the same kernels, so GPU time for the same work) and by alternating throughput.
#   docs/perf/raw/run_bv/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
base=$b/bin/trident_base pc=$b/bin/trident_pc pcm=$b/bin/trident
check cuda_tests 300 "$b/bin/cuda_tests"
check cuda_layouts 300 "${mp[@]}" -np 2 "$b/bin/cuda_layouts"
for r in 1 2; do
  for v in base pc pcm; do traced t_${v}_$r 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
done
for r in 1 2 3; do
  for v in base pc pcm; do one g1_${v}_$r 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
  (( r == 2 )) && pytorch pytorch124m --batch 32 --seq 1024 --steps 20
done
for r in 1 2; do
  for v in base pcm; do one ce_${v}_$r 2 "${!v}" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true; done
done
for r in 1 2; do
  for v in base pcm; do one big_split_${v}_$r 2 "${!v}" "${m15[@]}" "${split[@]}"; done
done
finish
