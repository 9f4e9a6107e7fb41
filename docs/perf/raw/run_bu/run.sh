#!/usr/bin/env bash
# Run BU: two gaps of the compute stream found in run BT's 124M timeline, closed:
#  - the fc bias gradient's column sums (side stream) started just before the attention backward
#    and kept the dK/dV kernel from starting for ~38 us per layer: the side stream now runs one
#    priority level below every other stream (src/backend/cuda/streams.cpp);
#  - the zeroing of the gradients (0.5 GB for 124M) sat on the compute stream at each step's
#    start (a 0.12 ms gap): it now runs on the side stream beside the forward, joined before the
#    first gradient write.
# The code is run_bv/priority_short_columns_side_zero.patch without its reduce.cu part (reverted
# after run BV).
# Binaries: bin/trident (this), bin/trident_base (7ec2109). cuda_tests, cuda_layouts (every
# 2-GPU layout still gives its reference's losses), alternating throughput on 1 GPU (124M, with
# PyTorch's baseline), dp2 ZeRO-1 with the copy engines, 1.5B-class tp2 (fused + split), and a
# timeline of each binary's 124M step.
#   docs/perf/raw/run_bu/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
base=$b/bin/trident_base new=$b/bin/trident
check cuda_tests 300 "$b/bin/cuda_tests"
check cuda_layouts 300 "${mp[@]}" -np 2 "$b/bin/cuda_layouts"
for r in 1 2 3; do
  one g1_base_$r 1 "$base" "${m124[@]}" --train.global_batch_size 32
  one g1_new_$r 1 "$new" "${m124[@]}" --train.global_batch_size 32
  (( r < 3 )) && pytorch pytorch124m_$r --batch 32 --seq 1024 --steps 20
done
for r in 1 2; do
  one ce_base_$r 2 "$base" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
  one ce_new_$r 2 "$new" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
done
for r in 1 2; do
  one big_g1_base_$r 1 "$base" "${m15[@]}"
  one big_g1_new_$r 1 "$new" "${m15[@]}"
  one big_split_base_$r 2 "$base" "${m15[@]}" "${split[@]}"
  one big_split_new_$r 2 "$new" "${m15[@]}" "${split[@]}"
done
for v in base new; do traced t_$v 1 "${!v}" "${m124[@]}" --train.global_batch_size 32; done
finish
