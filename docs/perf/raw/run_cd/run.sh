#!/usr/bin/env bash
# Run CD: the warp-specialized dK/dV kernel after run CC (399.7 us in-step against the
# single-warpgroup kernel's 373): its statistics now come from three warps a tile each in turn,
# loaded before the stage is free (one warp waiting out each tile's load latency looked like
# the pace), and the second consumer skips its first query tile (wholly before its keys).
# Attention tests first (a failure stops the run), cuda_tests, alternating 124M runs, timelines
# of both kernel sets.
#   docs/perf/raw/run_cd/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident
attention_first
check cuda_tests 300 "$b/bin/cuda_tests"
for r in 1 2; do
  one g1_tma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
  TRIDENT_ATTENTION_KERNELS=wgmma one g1_wgmma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
done
traced t_tma 1 "$bin" "${m124[@]}" --train.global_batch_size 32
TRIDENT_ATTENTION_KERNELS=wgmma traced t_wgmma 1 "$bin" "${m124[@]}" --train.global_batch_size 32
grep -A4 "^_ZN7trident3gpu49_GLOBAL__N__.*attention" "$out"/t_*_pairs.txt | grep -v "idle" | tail -12 >>"$out/summary.txt"
finish
