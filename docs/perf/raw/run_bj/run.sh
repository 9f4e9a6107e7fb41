#!/usr/bin/env bash
# Run BJ: where the dp2 main stream's extra idle time (run BI: 2.28 against 1.26 ms per step) sits
# (kernel_trace.py --gaps: the kernels the stream waited to start), and whether fewer, larger
# gradient buckets (fewer cross-GPU waits and flag writes on the compute stream) recover it:
# parallel.bucket_mb 25 (default) / 50 / 100 with the copy engines, alternating with 1 GPU.
#   docs/perf/raw/run_bj/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m124=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --bench.warmup 5)
g1=(--train.global_batch_size 32)
ce=(--train.global_batch_size 64 --parallel.zero 1 --parallel.dp_copy_engine true)
row() { grep -A1 '^model' "$1" | tail -1 | awk '{print $9, $10, $NF}'; }
one() {  # name, ranks, bench arguments...
  local name=$1 n=$2 t0=$SECONDS; shift 2
  timeout 150 "${mp[@]}" "${extra[@]}" -np "$n" "$b/bin/trident" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(row "$out/$name.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
extra=()
traced() {  # name, ranks, bench arguments...
  export CUDA_INJECTION64_PATH="$b/lib/libtrident_kernel_trace.so" TRIDENT_KERNEL_TRACE="$out/$1"
  extra=(-x CUDA_INJECTION64_PATH -x TRIDENT_KERNEL_TRACE)
  one "$@"
  extra=()
  unset CUDA_INJECTION64_PATH TRIDENT_KERNEL_TRACE
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
traced t_g1 1 "${m124[@]}" "${g1[@]}" --bench.steps 20 --bench.profile_steps 0
traced t_ce25 2 "${m124[@]}" "${ce[@]}" --bench.steps 20 --bench.profile_steps 0
traced t_ce100 2 "${m124[@]}" "${ce[@]}" --parallel.bucket_mb 100 --bench.steps 20 --bench.profile_steps 0
for i in 1 2; do
  one g1_$i 1 "${m124[@]}" "${g1[@]}" --bench.steps 30
  one ce25_$i 2 "${m124[@]}" "${ce[@]}" --bench.steps 30
  one ce50_$i 2 "${m124[@]}" "${ce[@]}" --parallel.bucket_mb 50 --bench.steps 30
  one ce100_$i 2 "${m124[@]}" "${ce[@]}" --parallel.bucket_mb 100 --bench.steps 30
done
py() { (unset LD_LIBRARY_PATH; timeout 60 python3 tools/kernel_trace/kernel_trace.py "$@"); }
py "$out/t_g1.0.csv" "$out/t_ce25.0.csv" --top 30 --gaps 15 >"$out/g1_vs_ce25.txt" 2>&1
py "$out/t_g1.0.csv" "$out/t_ce100.0.csv" --top 30 --gaps 15 >"$out/g1_vs_ce100.txt" 2>&1
grep -E "window" "$out"/g1_vs_*.txt | tee -a "$out/summary.txt"
cd "$out" && tar czf all.tgz *.log *.txt
