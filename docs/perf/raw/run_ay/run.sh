#!/usr/bin/env bash
# Run AY: as run AX, with the qkv weight gradient split in two row halves beside the two transfers of the
# split LayerNorm backward and the replicated-gradient TP sums waited only before a unit is announced:
# cuda_tests, cuda_layouts, and the 1.5B-class model on 1 GPU and tp2 + tp_overlap + tp_fused_sum
# with and without it, alternating.
#   docs/perf/raw/run_ay/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6 --bench.profile --bench.profile_steps 1)
fused=(--parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true)
one() {  # name, ranks, bench arguments...
  local name=$1 n=$2 t0=$SECONDS; shift 2
  timeout 120 "${mp[@]}" -np "$n" "$b/bin/trident" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -A1 '^model' "$out/$name.log" | tail -1 | awk '{print $9, $10, $NF}') ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
timeout 60 "$b/bin/cuda_tests" >"$out/cuda_tests.log" 2>&1
echo "cuda_tests: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ')" | tee -a "$out/summary.txt"
one split_1 2 "${m15[@]}" "${fused[@]}" --parallel.tp_split_layernorm_bwd true
one fused_1 2 "${m15[@]}" "${fused[@]}"
t0=$SECONDS
timeout 150 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1
echo "cuda_layouts: exit $? ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
one gpu1 1 "${m15[@]}"
one split_2 2 "${m15[@]}" "${fused[@]}" --parallel.tp_split_layernorm_bwd true
one fused_2 2 "${m15[@]}" "${fused[@]}"
cd "$out" && tar czf all.tgz *.log *.txt
