#!/usr/bin/env bash
# Run BX: the autotuner's reference candidate fixed by the candidate list (the first that does
# not split K, else the fewest K pieces) instead of the heuristic's first choice, so that the
# weight-gradient GEMMs may run single-pass (run BW: faster for qkv, fcproj and, with 4 pieces,
# proj). Binaries: bin/trident (this), bin/trident_base (7ec2109). cuda_tests (autotuning still
# changes no bit), cuda_layouts, the new choices (TRIDENT_GEMM_LOG=1), alternating throughput
# on 1 GPU (124M, with PyTorch's baseline), dp2 ZeRO-1 with the copy engines, 1.5B-class tp2.
# The rule: reference_candidate.patch (this folder; reverted after this run).
#   docs/perf/raw/run_bx/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
base=$b/bin/trident_base new=$b/bin/trident
check cuda_tests 300 "$b/bin/cuda_tests"
check cuda_layouts 300 "${mp[@]}" -np 2 "$b/bin/cuda_layouts"
TRIDENT_GEMM_LOG=1 one gemm_log 1 "$new" "${m124[@]}" --train.global_batch_size 32
for r in 1 2 3; do
  for v in base new; do one g1_${v}_$r 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
  (( r == 2 )) && pytorch pytorch124m --batch 32 --seq 1024 --steps 20
done
for r in 1 2; do
  for v in base new; do one ce_${v}_$r 2 "${!v}" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true; done
done
for v in base new; do
  one big_g1_$v 1 "${!v}" "${m15[@]}"
  one big_split_$v 2 "${!v}" "${m15[@]}" "${split[@]}"
done
finish
