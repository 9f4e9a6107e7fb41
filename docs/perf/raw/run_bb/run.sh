#!/usr/bin/env bash
# Run BB: the review fixes (per-slot wait check of the copy-engine link, the agreed refusal
# reason, the destructor's second barrier, the gather per pipeline slot) on GPUs: cuda_tests,
# cuda_layouts (fused sums now asserted equal to plain tp2), and the 1.5B-class tp2 with
# tp_overlap + tp_fused_sum, with and without tp_split_layernorm_bwd.
#   docs/perf/raw/run_bb/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6)
fused=(--parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true)
one() {  # name, ranks, bench arguments...
  local name=$1 n=$2 t0=$SECONDS; shift 2
  timeout 120 "${mp[@]}" -np "$n" "$b/bin/trident" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -A1 '^model' "$out/$name.log" | tail -1 | awk '{print $9, $10, $NF}') ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
timeout 60 "$b/bin/cuda_tests" >"$out/cuda_tests.log" 2>&1
echo "cuda_tests: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ')" | tee -a "$out/summary.txt"
t0=$SECONDS
timeout 150 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1
echo "cuda_layouts: exit $? ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
one split 2 "${m15[@]}" "${fused[@]}" --parallel.tp_split_layernorm_bwd true
one fused 2 "${m15[@]}" "${fused[@]}"
cd "$out" && tar czf all.tgz *.log *.txt
