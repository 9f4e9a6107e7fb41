#!/usr/bin/env bash
# Run BT: (1) the tenth session's commits not yet run on a GPU (HEAD 7ec2109 = bin/trident_base,
# bin/cuda_tests, bin/cuda_layouts); (2) three attention variants built from the working tree with
# -D switches (bin/trident_V, bin/cuda_tests_V):
#   S  (TRIDENT_ATTN_SPLIT=1): the backward waits for each product on its own, so the exponentials
#      run while dP is still on the tensor cores, and dS while dV is;
#   R  (TRIDENT_ATTN_RS=7, TRIDENT_ATTN_DQ_BLOCKS=3): at HS 64 the block-resident A operand (Q in
#      the forward, K and V in dK/dV, Q and dout in dQ) in registers, register-A wgmma;
#   SR both.
# The three were built from attention_split_rs.patch (this folder; reverted after this run) with
#   cmake -DCMAKE_CUDA_FLAGS='-DTRIDENT_ATTN_SPLIT=1 -DTRIDENT_ATTN_RS=7 -DTRIDENT_ATTN_DQ_BLOCKS=3' (SR).
#   docs/perf/raw/run_bt/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin
check cuda_tests_base 300 "$bin/cuda_tests"
check cuda_layouts 300 "${mp[@]}" -np 2 "$bin/cuda_layouts"
for v in S R SR; do check cuda_tests_$v 300 "$bin/cuda_tests_$v" --gtest_filter='*ttention*'; done
for v in base S R SR; do check kernels_$v 200 "$bin/trident_$v" bench --bench.kernels; done
for r in 1 2; do
  for v in base S R SR; do one g1_${v}_$r 1 "$bin/trident_$v" "${m124[@]}" --train.global_batch_size 32; done
done
pytorch pytorch124m --batch 32 --seq 1024 --steps 20
for v in base S R SR; do one g1_${v}_3 1 "$bin/trident_$v" "${m124[@]}" --train.global_batch_size 32; done
for v in base S R SR; do traced t_$v 1 "$bin/trident_$v" "${m124[@]}" --train.global_batch_size 32; done
finish
