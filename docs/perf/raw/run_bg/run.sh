#!/usr/bin/env bash
# Run BG: where the dp2 step's uniform ~3-4% kernel slowdown (runs BD-BF: every op, forward ones
# included, with SM clocks within 1% of the 1-GPU run's) comes from. Per-op profiles of GPT-2 124M
# (B 32) on 1 GPU; on two GPUs as two independent 1-GPU jobs at once; dp2 with one bucket reduced
# after the backward and no ZeRO gathers (nothing beside the forward or the backward); dp2 ZeRO-1
# with the copy engines, as launched so far (--bind-to none) and with mpirun's core binding.
#   docs/perf/raw/run_bg/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m124=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --bench.warmup 5 --bench.steps 30
      --bench.profile --bench.profile_steps 3)
row() { grep -A1 '^model' "$1" | tail -1 | awk '{print $9, $10, $NF}'; }
one() {  # name, ranks, bench arguments...
  local name=$1 n=$2 t0=$SECONDS; shift 2
  timeout 150 "${mp[@]}" -np "$n" "$b/bin/trident" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(row "$out/$name.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
one g1 1 "${m124[@]}" --train.global_batch_size 32
pids=()
for d in 0 1; do
  CUDA_VISIBLE_DEVICES=$d timeout 150 "${mp[@]}" -x CUDA_VISIBLE_DEVICES -np 1 "$b/bin/trident" bench "${m124[@]}" \
    --train.global_batch_size 32 >"$out/both_gpu$d.log" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
for d in 0 1; do echo "both_gpu$d: $(row "$out/both_gpu$d.log")" | tee -a "$out/summary.txt"; done
one dp2_onebucket 2 "${m124[@]}" --train.global_batch_size 64 --parallel.zero 0 --parallel.bucket_mb 100000
one ce 2 "${m124[@]}" --train.global_batch_size 64 --parallel.zero 1 --parallel.dp_copy_engine true
t0=$SECONDS
timeout 150 mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -np 2 "$b/bin/trident" bench "${m124[@]}" \
  --train.global_batch_size 64 --parallel.zero 1 --parallel.dp_copy_engine true >"$out/ce_bound.log" 2>&1
echo "ce_bound: exit $? $(row "$out/ce_bound.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
one g1_again 1 "${m124[@]}" --train.global_batch_size 32
cd "$out" && tar czf all.tgz *.log *.txt
