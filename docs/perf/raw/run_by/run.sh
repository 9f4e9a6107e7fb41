#!/usr/bin/env bash
# Run BY: the attention forward at HS 64 on wgmma streams 128 keys per step (m64n128k16 score
# products; half as many steps, barriers, row maxima and rescaling checks per key; 165 registers
# and 73 KB of shared memory, 3 blocks per SM instead of 4). Binaries: bin/trident (this),
# bin/trident_base (7ec2109). cuda_tests, the attention kernel rows, alternating 124M
# throughput with PyTorch's baseline, one timeline of each (the forward kernel's time in-step).
#   docs/perf/raw/run_by/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
base=$b/bin/trident_base new=$b/bin/trident
check cuda_tests 300 "$b/bin/cuda_tests"
for v in base new; do check kernels_$v 200 "${!v}" bench --bench.kernels; done
for r in 1 2 3; do
  for v in base new; do one g1_${v}_$r 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
  (( r == 2 )) && pytorch pytorch124m --batch 32 --seq 1024 --steps 20
done
for v in base new; do traced t_$v 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
grep -H "attention" "$out"/kernels_*.log | tee -a "$out/summary.txt"
finish
