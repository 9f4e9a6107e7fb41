#!/usr/bin/env bash
# Run BE: (1) whether two GPUs of the host slow each other down with no communication at all:
# GPT-2 124M on one GPU alone, then on both at once as two independent jobs, with the GPUs'
# clocks and power sampled; (2) steps queued one ahead (the default now: the device does not wait
# for the host between steps) against --bench.sync_steps, alternating, on 1 GPU, on dp2 ZeRO-1
# (NCCL and parallel.dp_copy_engine) and on the 1.5B-class tp2; (3) the PyTorch baseline of the
# same lease (target 1); cuda_tests and cuda_layouts.
#   docs/perf/raw/run_be/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m124=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --bench.warmup 5 --bench.steps 30)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6)
split=(--parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true --parallel.tp_split_layernorm_bwd true)
z1=(--train.global_batch_size 64 --parallel.zero 1)
row() { grep -A1 '^model' "$1" | tail -1 | awk '{print $9, $10, $NF}'; }
one() {  # name, ranks, bench arguments...
  local name=$1 n=$2 t0=$SECONDS; shift 2
  timeout 150 "${mp[@]}" -np "$n" "$b/bin/trident" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(row "$out/$name.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
smi() { nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
          --format=csv -lms 250 >"$out/smi_$1.csv" 2>&1 & smi_pid=$!; }
nvidia-smi --query-gpu=name,memory.total,power.limit,clocks.max.sm --format=csv,noheader | tee "$out/gpus.txt"
long=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size 32
      --bench.warmup 5 --bench.steps 80)
# (1) alone on each GPU, then both at once
for d in 0 1; do
  smi alone$d
  t0=$SECONDS
  CUDA_VISIBLE_DEVICES=$d timeout 150 "${mp[@]}" -x CUDA_VISIBLE_DEVICES -np 1 "$b/bin/trident" bench "${long[@]}" \
    >"$out/alone_gpu$d.log" 2>&1
  echo "alone_gpu$d: exit $? $(row "$out/alone_gpu$d.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
  kill $smi_pid
done
smi both
t0=$SECONDS
pids=()
for d in 0 1; do
  CUDA_VISIBLE_DEVICES=$d timeout 150 "${mp[@]}" -x CUDA_VISIBLE_DEVICES -np 1 "$b/bin/trident" bench "${long[@]}" \
    >"$out/both_gpu$d.log" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
kill $smi_pid
for d in 0 1; do echo "both_gpu$d: $(row "$out/both_gpu$d.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"; done
smi dp2
one ce_q1 2 "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true --bench.steps 80
kill $smi_pid
# (2) queued one ahead against --bench.sync_steps
one g1_q1 1 "${m124[@]}" --train.global_batch_size 32
one g1_s1 1 "${m124[@]}" --train.global_batch_size 32 --bench.sync_steps
one z1_q1 2 "${m124[@]}" "${z1[@]}"
one ce_q2 2 "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
one ce_s1 2 "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true --bench.sync_steps
one g1_q2 1 "${m124[@]}" --train.global_batch_size 32
one g1_s2 1 "${m124[@]}" --train.global_batch_size 32 --bench.sync_steps
one ce_q3 2 "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
one ce_s2 2 "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true --bench.sync_steps
one z1_q2 2 "${m124[@]}" "${z1[@]}"
one g1_prof 1 "${m124[@]}" --train.global_batch_size 32 --bench.profile --bench.profile_steps 3
one ce_prof 2 "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true --bench.profile --bench.profile_steps 3
# (3) the same lease's PyTorch baseline
t0=$SECONDS
(unset LD_LIBRARY_PATH; timeout 240 python3 tools/bench_pytorch.py --batch 32 --seq 1024 --steps 20) >"$out/pytorch124m_1gpu.log" 2>&1
echo "pytorch124m_1gpu: exit $? $(grep -iE 'tok' "$out/pytorch124m_1gpu.log" | tail -1) ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
one g1_q3 1 "${m124[@]}" --train.global_batch_size 32
# 1.5B-class tp2 (target 3a)
one big_gpu1 1 "${m15[@]}"
one big_split_q1 2 "${m15[@]}" "${split[@]}"
one big_split_s1 2 "${m15[@]}" "${split[@]}" --bench.sync_steps
one big_split_q2 2 "${m15[@]}" "${split[@]}"
t0=$SECONDS
timeout 150 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1
echo "cuda_layouts: exit $? ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
t0=$SECONDS
timeout 200 "$b/bin/cuda_tests" >"$out/cuda_tests.log" 2>&1
echo "cuda_tests: exit $? $(grep -E 'PASSED|FAILED' "$out/cuda_tests.log" | head -3 | tr '\n' ' ') ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
cd "$out" && tar czf all.tgz *.log *.txt *.csv
