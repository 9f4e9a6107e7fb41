#!/usr/bin/env bash
# Run AS: cuda_layouts (dp ZeRO-1 with parallel.dp_comm_ctas 8), GPT-2 124M B=32 1 GPU A/B of
# trident_base (e92ed82) against trident (this session), and dp2 ZeRO-1 with the DP communicator's
# CTAs capped (parallel.dp_comm_ctas 8 / 16) or NCCL_CTA_POLICY=1, alternating with 1-GPU runs.
#   docs/perf/raw/run_as/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --bench.warmup 5 --bench.steps 30)
one() {  # name, ranks, binary, extra environment ("" or VAR=value), bench arguments...
  local name=$1 n=$2 bin=$3 e=$4; shift 4
  local x=()
  [[ -n $e ]] && x=(-x "${e%%=*}")
  timeout 200 env $e "${mp[@]}" "${x[@]}" -np "$n" "$b/bin/$bin" bench "${m[@]}" --train.global_batch_size $((32 * n)) "$@" \
    >"$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -A1 '^model' "$out/$name.log" | tail -1 | awk '{print $9, $10, $NF}')" | tee -a "$out/summary.txt"
}
timeout 120 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1; echo "cuda_layouts: exit $?" | tee -a "$out/summary.txt"
for i in 1 2 3; do
  one "base_1gpu_$i" 1 trident_base ''
  one "new_1gpu_$i" 1 trident ''
done
for i in 1 2; do
  one "dp2_$i" 2 trident '' --parallel.zero 1
  one "dp2_c8_$i" 2 trident '' --parallel.zero 1 --parallel.dp_comm_ctas 8
  one "dp2_c16_$i" 2 trident '' --parallel.zero 1 --parallel.dp_comm_ctas 16
  one "dp2_policy1_$i" 2 trident NCCL_CTA_POLICY=1 --parallel.zero 1
  one "new_1gpu_dp_$i" 1 trident ''
done
