#!/usr/bin/env bash
# Run AR: checks of the LayerNorm backward for C > 1024 and parallel.tp_comm_ctas, then
# GPT-2 1.5B-class (gpt2-1.5b-tp.cfg, B=8, G=64): 1 GPU, tp2, tp2 + tp_overlap (margin 8, 8 CTAs), pp2;
# trident_base = e92ed82 (before this session) for the before rows.
#   docs/perf/raw/run_ar/run.sh BUNDLE OUT
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
"$b/bin/cuda_tests" >"$out/cuda_tests.log" 2>&1; echo "cuda_tests: exit $? $(grep -c '^\[       OK' "$out/cuda_tests.log") OK" | tee -a "$out/summary.txt"
timeout 120 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1; echo "cuda_layouts: exit $?" | tee -a "$out/summary.txt"
timeout 120 "$b/bin/trident" bench --bench.kernels >"$out/kernels.log" 2>&1; echo "kernels: exit $?" | tee -a "$out/summary.txt"
ov=(--parallel.tp 2 --parallel.tp_overlap true --parallel.tp_sm_margin 8 --parallel.tp_comm_ctas 8)
one gpu1 1 trident ''
one base_gpu1 1 trident_base ''
one tp2 2 trident '' --parallel.tp 2
one base_tp2 2 trident_base '' --parallel.tp 2
one ov_m8_c8 2 trident '' "${ov[@]}"
one ov_m0_c8 2 trident '' --parallel.tp 2 --parallel.tp_overlap true --parallel.tp_comm_ctas 8
one ov_m8_c16 2 trident '' --parallel.tp 2 --parallel.tp_overlap true --parallel.tp_sm_margin 8 --parallel.tp_comm_ctas 16
one pp2 2 trident '' --parallel.pp 2 --parallel.schedule 1f1b
one gpu1_again 1 trident ''
one tp2_again 2 trident '' --parallel.tp 2
one ov_m8_c8_again 2 trident '' "${ov[@]}"
m15=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size 32 --bench.warmup 3 --bench.steps 10)
one g124_1gpu 1 trident ''
one base_g124_1gpu 1 trident_base ''
