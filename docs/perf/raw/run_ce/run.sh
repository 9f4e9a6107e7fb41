#!/usr/bin/env bash
# Run CE: the warp-specialized dK/dV kernel with K and V of the item held in registers (the score
# products become register-A wgmma and read only the query tiles from shared memory, halving
# their shared-memory traffic; setmaxnreg 56/224) as bin/trident, against run CD's kernel (K, V
# read from shared memory: bin/trident_ss) and the single-warpgroup kernels
# (TRIDENT_ATTENTION_KERNELS=wgmma). Attention tests first, cuda_tests, alternating 124M runs,
# timelines; and whether Nsight Compute is on the node.
#   docs/perf/raw/run_ce/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident ss=$b/bin/trident_ss
attention_first
check cuda_tests 300 "$b/bin/cuda_tests"
for r in 1 2; do
  one g1_regs_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
  one g1_ss_$r 1 "$ss" "${m124[@]}" --train.global_batch_size 32
  TRIDENT_ATTENTION_KERNELS=wgmma one g1_wgmma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
done
traced t_regs 1 "$bin" "${m124[@]}" --train.global_batch_size 32
grep "^_ZN.*attention" "$out"/t_regs_pairs.txt >>"$out/summary.txt"
check ncu_where 10 bash -c 'ls /usr/local/cuda/bin | grep -i -E "ncu|nsys"; which ncu nsys'
finish
