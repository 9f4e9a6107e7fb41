#!/usr/bin/env bash
# Run BD: parallel.dp_copy_engine (dp2 ZeRO-1: each bucket's other half sent by the copy engines,
# added by the optimizer; the updated parameters sent back alike) against the NCCL reduce-scatter
# and all-gather, alternating, with the lease's 1-GPU runs (target 2); profiles of all three;
# cuda_tests and cuda_layouts (which now asserts that the exchange gives the reduce-scatter's
# losses bit for bit).
#   docs/perf/raw/run_bd/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m124=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --bench.warmup 5 --bench.steps 30)
prof=(--bench.profile --bench.profile_steps 3)
one() {  # name, ranks, bench arguments...
  local name=$1 n=$2 t0=$SECONDS; shift 2
  timeout 120 "${mp[@]}" -np "$n" "$b/bin/trident" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -A1 '^model' "$out/$name.log" | tail -1 | awk '{print $9, $10, $NF}') ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
z1=(--train.global_batch_size 64 --parallel.zero 1)
one g1_1 1 "${m124[@]}" --train.global_batch_size 32
one z1_1 2 "${m124[@]}" "${z1[@]}"
one ce_1 2 "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
one z1_2 2 "${m124[@]}" "${z1[@]}"
one ce_2 2 "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
one g1_2 1 "${m124[@]}" --train.global_batch_size 32
one ce_3 2 "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
one z1_3 2 "${m124[@]}" "${z1[@]}"
one g1_prof 1 "${m124[@]}" --train.global_batch_size 32 "${prof[@]}"
one z1_prof 2 "${m124[@]}" "${z1[@]}" "${prof[@]}"
one ce_prof 2 "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true "${prof[@]}"
t0=$SECONDS
timeout 150 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1
echo "cuda_layouts: exit $? ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
t0=$SECONDS
timeout 200 "$b/bin/cuda_tests" >"$out/cuda_tests.log" 2>&1
echo "cuda_tests: exit $? $(grep -E 'PASSED|FAILED' "$out/cuda_tests.log" | head -3 | tr '\n' ' ') ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
cd "$out" && tar czf all.tgz *.log *.txt
