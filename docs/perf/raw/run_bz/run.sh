#!/usr/bin/env bash
# Run BZ: the opposite of run BY's direction: a fifth forward block per SM at HS 64 on wgmma
# (__launch_bounds__(128, 5): 96 registers from 121, a 60-byte spill; 42 KB of shared memory per
# block, 210 KB for five). Binaries: bin/trident (7ec2109 + -DTRIDENT_FWD_BLOCKS=5 through
# forward_min_blocks.patch), bin/trident_base (7ec2109). cuda_tests (attention), the attention
# kernel rows, alternating 124M throughput, one timeline of each.
#   docs/perf/raw/run_bz/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
base=$b/bin/trident_base new=$b/bin/trident
check cuda_tests 300 "$b/bin/cuda_tests" --gtest_filter='*ttention*'
for v in base new; do check kernels_$v 200 "${!v}" bench --bench.kernels; done
for r in 1 2 3; do
  for v in base new; do one g1_${v}_$r 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
done
for v in base new; do traced t_$v 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
grep -H "attention" "$out"/kernels_*.log | tee -a "$out/summary.txt"
finish
