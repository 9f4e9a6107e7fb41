#!/usr/bin/env bash
# Run AZ: the current numbers of every target with the session's final code, one lease:
# 1.5B-class (gpt2-1.5b-tp.cfg, B 8, G 64) on 1 GPU, plain tp2, tp2 + tp_overlap + tp_fused_sum
# (with and without tp_split_layernorm_bwd; the copy engine's sends profiled); GPT-2 124M on 1 GPU
# with the PyTorch baseline (target 1) and dp2 ZeRO-1 (target 2).
#   docs/perf/raw/run_az/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6 --bench.profile --bench.profile_steps 1)
m124=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --bench.warmup 5 --bench.steps 30)
fused=(--parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true)
one() {  # name, ranks, bench arguments...
  local name=$1 n=$2 t0=$SECONDS; shift 2
  timeout 120 "${mp[@]}" -np "$n" "$b/bin/trident" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -A1 '^model' "$out/$name.log" | tail -1 | awk '{print $9, $10, $NF}') ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
one gpu1 1 "${m15[@]}"
one split 2 "${m15[@]}" "${fused[@]}" --parallel.tp_split_layernorm_bwd true
one fused 2 "${m15[@]}" "${fused[@]}"
one tp2 2 "${m15[@]}" --parallel.tp 2
one split_again 2 "${m15[@]}" "${fused[@]}" --parallel.tp_split_layernorm_bwd true
one gpu1_again 1 "${m15[@]}"
one g124_1gpu 1 "${m124[@]}" --train.global_batch_size 32
one g124_dp2_zero1 2 "${m124[@]}" --train.global_batch_size 64 --parallel.zero 1
one g124_1gpu_again 1 "${m124[@]}" --train.global_batch_size 32
one g124_dp2_zero1_again 2 "${m124[@]}" --train.global_batch_size 64 --parallel.zero 1
t0=$SECONDS
(unset LD_LIBRARY_PATH; timeout 240 python3 tools/bench_pytorch.py --batch 32 --seq 1024 --steps 20) >"$out/pytorch124m_1gpu.log" 2>&1
echo "pytorch124m_1gpu: exit $? $(grep -iE 'tok' "$out/pytorch124m_1gpu.log" | tail -1) ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
cd "$out" && tar czf all.tgz *.log *.txt
