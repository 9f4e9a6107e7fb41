#!/usr/bin/env bash
# Run AV: parallel.tp_fused_sum (TP partial sums moved by the copy engines, added inside the
# LayerNorm kernels): cuda_tests (with the new exactness test), cuda_layouts (fused sums alone and
# with tp_overlap against 1 GPU and plain tp2), and the 1.5B-class model: 1 GPU, tp2, tp2 with
# fused sums, with tp_overlap, and with both.
#   docs/perf/raw/run_av/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6 --bench.profile --bench.profile_steps 1)
one() {  # name, ranks, bench arguments...
  local name=$1 n=$2 t0=$SECONDS; shift 2
  timeout 120 "${mp[@]}" -np "$n" "$b/bin/trident" bench "${m15[@]}" "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -A1 '^model' "$out/$name.log" | tail -1 | awk '{print $9, $10, $NF}') ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
timeout 60 "$b/bin/cuda_tests" >"$out/cuda_tests.log" 2>&1
echo "cuda_tests: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ')" | tee -a "$out/summary.txt"
one tp2_ov_fused 2 --parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true
one tp2 2 --parallel.tp 2
one tp2_fused 2 --parallel.tp 2 --parallel.tp_fused_sum true
t0=$SECONDS
timeout 150 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1
echo "cuda_layouts: exit $? ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
one gpu1 1
one tp2_ov 2 --parallel.tp 2 --parallel.tp_overlap true
one tp2_ov_fused_again 2 --parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true
one tp2_again 2 --parallel.tp 2
