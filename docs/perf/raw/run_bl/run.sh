#!/usr/bin/env bash
# Run BL: kernel timelines (tools/kernel_trace) of the 1.5B-class model (gpt2-1.5b-tp.cfg, B 8,
# G 64) on 1 GPU and on tp2 with tp_overlap + tp_fused_sum + tp_split_layernorm_bwd (rank 0):
# how much of the tp2 step the compute stream stands idle and before which kernels, and which
# kernels take longer than their 1-GPU halves (target 3a).
#   docs/perf/raw/run_bl/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
export CUDA_INJECTION64_PATH="$b/lib/libtrident_kernel_trace.so"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH
    -x CUDA_INJECTION64_PATH -x TRIDENT_KERNEL_TRACE)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 4 --bench.profile_steps 0)
split=(--parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true --parallel.tp_split_layernorm_bwd true)
row() { grep -A1 '^model' "$1" | tail -1 | awk '{print $9, $10, $NF}'; }
traced() {  # name, ranks, bench arguments...
  local name=$1 n=$2 t0=$SECONDS; shift 2
  TRIDENT_KERNEL_TRACE="$out/$name" timeout 200 "${mp[@]}" -np "$n" "$b/bin/trident" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(row "$out/$name.log") ($((SECONDS - t0)) s; trace $(wc -l <"$out/$name.0.csv") lines)" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
traced big_g1 1 "${m15[@]}"
traced big_split 2 "${m15[@]}" "${split[@]}"
py() { (unset LD_LIBRARY_PATH CUDA_INJECTION64_PATH; timeout 120 python3 tools/kernel_trace/kernel_trace.py "$@"); }
py "$out/big_g1.0.csv" "$out/big_split.0.csv" --top 40 --gaps 20 >"$out/g1_vs_split.txt" 2>&1
py "$out/big_split.1.csv" --top 5 --gaps 20 >"$out/split_rank1.txt" 2>&1
grep -E "window" "$out"/g1_vs_split.txt "$out/split_rank1.txt" | tee -a "$out/summary.txt"
cd "$out" && tar czf all.tgz *.log *.txt
