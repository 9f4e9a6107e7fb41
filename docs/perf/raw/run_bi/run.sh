#!/usr/bin/env bash
# Run BI: kernel timelines (tools/kernel_trace, CUPTI) of GPT-2 124M on 1 GPU and on dp2 ZeRO-1
# (copy engines; NCCL), rank 0: is the dp2 step's ~3% slowdown in the kernels' own durations or in
# idle gaps between them? kernel_trace.py compares the steady-state halves kernel by kernel.
#   docs/perf/raw/run_bi/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
export CUDA_INJECTION64_PATH="$b/lib/libtrident_kernel_trace.so"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH
    -x CUDA_INJECTION64_PATH -x TRIDENT_KERNEL_TRACE)
m124=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --bench.warmup 5 --bench.steps 20
      --bench.profile_steps 0)
row() { grep -A1 '^model' "$1" | tail -1 | awk '{print $9, $10, $NF}'; }
traced() {  # name, ranks, bench arguments...
  local name=$1 n=$2 t0=$SECONDS; shift 2
  TRIDENT_KERNEL_TRACE="$out/$name" timeout 150 "${mp[@]}" -np "$n" "$b/bin/trident" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(row "$out/$name.log") ($((SECONDS - t0)) s; trace $(wc -l <"$out/$name.0.csv") lines)" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
traced g1 1 "${m124[@]}" --train.global_batch_size 32
traced ce 2 "${m124[@]}" --train.global_batch_size 64 --parallel.zero 1 --parallel.dp_copy_engine true
traced z1 2 "${m124[@]}" --train.global_batch_size 64 --parallel.zero 1
traced g1_again 1 "${m124[@]}" --train.global_batch_size 32
py() { (unset LD_LIBRARY_PATH CUDA_INJECTION64_PATH; timeout 60 python3 tools/kernel_trace/kernel_trace.py "$@"); }
py "$out/g1.0.csv" "$out/ce.0.csv" --top 40 >"$out/g1_vs_ce.txt" 2>&1
py "$out/g1.0.csv" "$out/z1.0.csv" --top 40 >"$out/g1_vs_z1.txt" 2>&1
py "$out/g1.0.csv" "$out/g1_again.0.csv" --top 40 >"$out/g1_vs_g1_again.txt" 2>&1
py "$out/ce.1.csv" --top 5 >"$out/ce_rank1.txt" 2>&1
head -2 "$out"/g1_vs_*.txt "$out/ce_rank1.txt" | tee -a "$out/summary.txt"
cd "$out" && tar czf all.tgz *.log *.txt
