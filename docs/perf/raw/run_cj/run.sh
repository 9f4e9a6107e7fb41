#!/usr/bin/env bash
# Run CJ (2 GPUs): the warp-specialized attention forward (94f78de, default) against the
# single-warpgroup wgmma forward (TRIDENT_ATTENTION_KERNELS=wgmma, same binary) in every
# measured target: cuda_tests and both attention-kernel sets' tests, cuda_layouts (every 2-GPU
# layout exact against one GPU), 124M on 1 GPU with PyTorch's baseline (target 1), dp2 ZeRO-1
# with the copy engines (target 2), the 1.5B-class model on 1 GPU and tp2 fused + split
# (target 3a), and the kernel bench.
#   docs/perf/raw/run_cj/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident
check cuda_tests 300 "$b/bin/cuda_tests"
TRIDENT_ATTENTION_KERNELS=wgmma check cuda_attention_wgmma 120 "$b/bin/cuda_tests" --gtest_filter='CudaOps.Attention*'
TRIDENT_ATTENTION_KERNELS=mma check cuda_attention_mma 120 "$b/bin/cuda_tests" --gtest_filter='CudaOps.Attention*'
check cuda_layouts 300 "${mp[@]}" -np 2 "$b/bin/cuda_layouts"
check kernels_tma 200 "$bin" bench --bench.kernels
for r in 1 2; do
  one g1_tma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
  TRIDENT_ATTENTION_KERNELS=wgmma one g1_wgmma_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
  (( r == 1 )) && pytorch pytorch124m --batch 32 --seq 1024 --steps 20
done
one dp2_tma 2 "$bin" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
TRIDENT_ATTENTION_KERNELS=wgmma one dp2_wgmma 2 "$bin" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
one big_g1_tma 1 "$bin" "${m15[@]}"
one big_split_tma 2 "$bin" "${m15[@]}" "${split[@]}"
TRIDENT_ATTENTION_KERNELS=wgmma one big_g1_wgmma 1 "$bin" "${m15[@]}"
TRIDENT_ATTENTION_KERNELS=wgmma one big_split_wgmma 2 "$bin" "${m15[@]}" "${split[@]}"
grep -H "attention" "$out"/kernels_tma.log >>"$out/summary.txt"
grep -h "^(GPU" "$out"/g1_tma_1.log "$out"/dp2_tma.log >>"$out/summary.txt"
finish
