#!/usr/bin/env bash
# Run AW: the register-resident LayerNorm forward kernel and the head's fused input-gradient sum,
# against run AV's binary (trident_base, commit 4b53dbd) in the same lease: cuda_tests,
# cuda_layouts, the 1.5B-class model (1 GPU; tp2 + tp_overlap + tp_fused_sum) and GPT-2 124M on
# 1 GPU, new and base alternating.
#   docs/perf/raw/run_aw/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6 --bench.profile --bench.profile_steps 1)
m124=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size 32
      --bench.warmup 5 --bench.steps 30)
fused=(--parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true)
one() {  # name, binary, ranks, bench arguments...
  local name=$1 bin=$2 n=$3 t0=$SECONDS; shift 3
  timeout 120 "${mp[@]}" -np "$n" "$b/bin/$bin" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -A1 '^model' "$out/$name.log" | tail -1 | awk '{print $9, $10, $NF}') ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
timeout 60 "$b/bin/cuda_tests" >"$out/cuda_tests.log" 2>&1
echo "cuda_tests: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ')" | tee -a "$out/summary.txt"
for i in 1 2; do
  one "tp2_fused_$i" trident 2 "${m15[@]}" "${fused[@]}"
  one "base_tp2_fused_$i" trident_base 2 "${m15[@]}" "${fused[@]}"
done
one gpu1 trident 1 "${m15[@]}"
one base_gpu1 trident_base 1 "${m15[@]}"
for i in 1 2; do
  one "g124_$i" trident 1 "${m124[@]}"
  one "base_g124_$i" trident_base 1 "${m124[@]}"
done
t0=$SECONDS
timeout 150 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1
echo "cuda_layouts: exit $? ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
cd "$out" && tar czf all.tgz *.log *.txt
