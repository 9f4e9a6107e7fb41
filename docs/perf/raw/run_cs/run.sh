#!/usr/bin/env bash
# Run CS (1 GPU): target 1 with the session's final code (28aa42b, the kernels of 1606a02):
# GPT-2 124M on one GPU twice around PyTorch's baseline in the same lease, then the per-op profile
# (`--bench.profile`, 10 profiled steps) and a kernel timeline: where the step's time goes.
#   docs/perf/raw/run_cs/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident
one g1_1 1 "$bin" "${m124[@]}" --train.global_batch_size 32
pytorch pytorch124m --batch 32 --seq 1024 --steps 20
one g1_2 1 "$bin" "${m124[@]}" --train.global_batch_size 32
one g1_prof 1 "$bin" "${m124[@]}" --train.global_batch_size 32 --bench.profile --bench.profile_steps 10
traced t_g1 1 "$bin" "${m124[@]}" --train.global_batch_size 32
sed -n '/GPU time per step by op/,$p' "$out/g1_prof.log" >>"$out/summary.txt"
finish
