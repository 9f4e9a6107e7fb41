#!/usr/bin/env bash
# Run CM (2 GPUs): the final code (after e205ec4's review changes to the warp-specialized
# forward) in every 2-GPU layout: cuda_layouts (exact against one GPU), cuda_tests, and one
# 124M run on 1 GPU and dp2 for the record.
#   docs/perf/raw/run_cm/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident
attention_first
check cuda_tests 300 "$b/bin/cuda_tests"
check cuda_layouts 300 "${mp[@]}" -np 2 "$b/bin/cuda_layouts"
one g1 1 "$bin" "${m124[@]}" --train.global_batch_size 32
one dp2 2 "$bin" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
finish
