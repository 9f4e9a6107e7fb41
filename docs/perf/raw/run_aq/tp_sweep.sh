#!/usr/bin/env bash
# Run AQ: GPT-2 1.5B-class (gpt2-1.5b-tp.cfg, B=8, G=64) on 2 GPUs, tp2 variants:
# trident_base = e92ed82; trident = weight-gradient GEMMs beside the backward TP all-reduce +
# parallel.tp_sm_margin (cuBLASLt SM count target for GEMMs beside a TP all-reduce).
#   docs/perf/raw/run_aq/tp_sweep.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6 --bench.profile --bench.profile_steps 1)
one() {  # name, ranks, binary, extra environment ("" or VAR=value), bench arguments...
  local name=$1 n=$2 bin=$3 e=$4; shift 4
  local x=()
  [[ -n $e ]] && x=(-x "${e%%=*}")
  timeout 200 env $e "${mp[@]}" "${x[@]}" -np "$n" "$b/bin/$bin" bench "${m15[@]}" "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -A1 '^model' "$out/$name.log" | tail -1 | awk '{print $9, $10, $NF}')" | tee -a "$out/summary.txt"
}
timeout 120 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1; echo "cuda_layouts: exit $?" | tee -a "$out/summary.txt"
one base_tp2 2 trident_base '' --parallel.tp 2
one tp2 2 trident '' --parallel.tp 2
one tp2_m8 2 trident '' --parallel.tp 2 --parallel.tp_sm_margin 8
one tp2_m16 2 trident '' --parallel.tp 2 --parallel.tp_sm_margin 16
one ov_m0 2 trident '' --parallel.tp 2 --parallel.tp_overlap true
one ov_m8 2 trident '' --parallel.tp 2 --parallel.tp_overlap true --parallel.tp_sm_margin 8
one ov_m16 2 trident '' --parallel.tp 2 --parallel.tp_overlap true --parallel.tp_sm_margin 16
one ov_m8_ctas8 2 trident NCCL_MAX_CTAS=8 --parallel.tp 2 --parallel.tp_overlap true --parallel.tp_sm_margin 8
one ov_m16_ctas16 2 trident NCCL_MAX_CTAS=16 --parallel.tp 2 --parallel.tp_overlap true --parallel.tp_sm_margin 16
one tp2_m8_ctas8 2 trident NCCL_MAX_CTAS=8 --parallel.tp 2 --parallel.tp_sm_margin 8
one gpu1 1 trident ''
one base_tp2_again 2 trident_base '' --parallel.tp 2
