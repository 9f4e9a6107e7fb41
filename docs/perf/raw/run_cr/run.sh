#!/usr/bin/env bash
# Run CR (1 GPU): the LayerNorm forward with the row held in registers (default binary) against
# the three-pass kernel (bin/trident_base, built from the commit before). cuda_tests; the kernel
# bench; the same short training run with both binaries, whose per-step losses and gradient norms
# (JSON, full precision) must be equal; alternating 124M runs, timelines, and the 1.5B-class model
# (C = 1536) on one GPU with each.
#   docs/perf/raw/run_cr/run.sh BUNDLE OUT DATA_PREFIX
source tools/perf_lib.sh "$1" "$2"
bin=$b/bin/trident
base=$b/bin/trident_base
check cuda_tests 300 "$b/bin/cuda_tests"
check kernels_new 200 "$bin" bench --bench.kernels
check kernels_base 200 "$base" bench --bench.kernels
short=(train --config inputs/models/gpt2-124m.cfg --data.train "$3" --model.seq_len 256 --train.micro_batch_size 8
       --train.global_batch_size 8 --train.steps 8)
check train_new 120 "$bin" "${short[@]}" --log.metrics "$out/metrics_new.jsonl"
check train_base 120 "$base" "${short[@]}" --log.metrics "$out/metrics_base.jsonl"
if cmp -s <(grep -o '"grad_norm":[^,]*,"loss":[^,]*' "$out/metrics_new.jsonl") \
          <(grep -o '"grad_norm":[^,]*,"loss":[^,]*' "$out/metrics_base.jsonl"); then
  echo "training losses and gradient norms: bitwise equal ($(wc -l <"$out/metrics_new.jsonl") steps)" | tee -a "$out/summary.txt"
else
  echo "training losses and gradient norms: DIFFER" | tee -a "$out/summary.txt"
fi
for r in 1 2; do
  one g1_new_$r 1 "$bin" "${m124[@]}" --train.global_batch_size 32
  one g1_base_$r 1 "$base" "${m124[@]}" --train.global_batch_size 32
done
traced t_new 1 "$bin" "${m124[@]}" --train.global_batch_size 32
traced t_base 1 "$base" "${m124[@]}" --train.global_batch_size 32
one big_new 1 "$bin" "${m15[@]}"
one big_base 1 "$base" "${m15[@]}"
grep -H "layernorm" "$out"/kernels_*.log >>"$out/summary.txt"
grep -A60 "^kernel" "$out"/t_*_pairs.txt | grep -i "layernorm" >>"$out/summary.txt"
finish
