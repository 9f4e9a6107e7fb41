#!/usr/bin/env bash
# Run BF: the GPUs' SM clocks and power sampled (nvidia-smi, every 250 ms) while GPT-2 124M trains
# on 1 GPU and on dp2 ZeRO-1 (NCCL; parallel.dp_copy_engine), 80 steps each: is the dp2 step's
# uniform kernel slowdown (run BE) a lower clock under the power cap? Then the current numbers of
# targets 1, 2 and 3a with the session's final code, alternating, and the lease's PyTorch baseline.
#   docs/perf/raw/run_bf/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m124=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --bench.warmup 5)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6)
split=(--parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true --parallel.tp_split_layernorm_bwd true)
g1=(--train.global_batch_size 32)
z1=(--train.global_batch_size 64 --parallel.zero 1)
ce=(--train.global_batch_size 64 --parallel.zero 1 --parallel.dp_copy_engine true)
row() { grep -A1 '^model' "$1" | tail -1 | awk '{print $9, $10, $NF}'; }
one() {  # name, ranks, bench arguments...
  local name=$1 n=$2 t0=$SECONDS; shift 2
  timeout 150 "${mp[@]}" -np "$n" "$b/bin/trident" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(row "$out/$name.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
sampled() {  # name, ranks, bench arguments...: one() with the clocks sampled
  nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader,nounits -lms 250 >"$out/smi_$1.csv" 2>&1 &
  local pid=$!
  one "$@"
  kill $pid
  # busy samples (> 300 W) per GPU: mean SM clock and power
  awk -F', ' '$4 > 300 {n[$1]++; c[$1] += $2; p[$1] += $4} END {for (g in n) printf "  gpu %s: %d busy samples, SM %.0f MHz, %.0f W\n", g, n[g], c[g] / n[g], p[g] / n[g]}' \
    "$out/smi_$1.csv" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total,power.limit,clocks.max.sm --format=csv,noheader | tee "$out/gpus.txt"
sampled clk_g1 1 "${m124[@]}" "${g1[@]}" --bench.steps 80
sampled clk_ce 2 "${m124[@]}" "${ce[@]}" --bench.steps 80
sampled clk_z1 2 "${m124[@]}" "${z1[@]}" --bench.steps 80
sampled clk_g1_again 1 "${m124[@]}" "${g1[@]}" --bench.steps 80
for i in 1 2; do
  one g1_$i 1 "${m124[@]}" "${g1[@]}" --bench.steps 30
  one ce_$i 2 "${m124[@]}" "${ce[@]}" --bench.steps 30
  one z1_$i 2 "${m124[@]}" "${z1[@]}" --bench.steps 30
done
t0=$SECONDS
(unset LD_LIBRARY_PATH; timeout 240 python3 tools/bench_pytorch.py --batch 32 --seq 1024 --steps 20) >"$out/pytorch124m_1gpu.log" 2>&1
echo "pytorch124m_1gpu: exit $? $(grep -iE 'tok' "$out/pytorch124m_1gpu.log" | tail -1) ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
one g1_3 1 "${m124[@]}" "${g1[@]}" --bench.steps 30
one big_gpu1 1 "${m15[@]}"
one big_split_1 2 "${m15[@]}" "${split[@]}"
one big_split_2 2 "${m15[@]}" "${split[@]}"
one big_gpu1_again 1 "${m15[@]}"
cd "$out" && tar czf all.tgz *.log *.txt *.csv
