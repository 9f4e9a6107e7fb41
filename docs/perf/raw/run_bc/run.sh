#!/usr/bin/env bash
# Run BC: the split LayerNorm backward with the residual-gradient gather of the attention part
# beside the next block's fcproj input gradient on this rank's rows (instead of beside the qkv
# weight gradient's second row half), against ccbe026 (trident_base), alternating; 1 GPU for the
# scaling; cuda_layouts.
#   docs/perf/raw/run_bc/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6)
split=(--parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true --parallel.tp_split_layernorm_bwd true)
one() {  # name, binary, ranks, bench arguments...
  local name=$1 bin=$2 n=$3 t0=$SECONDS; shift 3
  timeout 120 "${mp[@]}" -np "$n" "$b/bin/$bin" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -A1 '^model' "$out/$name.log" | tail -1 | awk '{print $9, $10, $NF}') ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
one split_1 trident 2 "${m15[@]}" "${split[@]}"
one base_split_1 trident_base 2 "${m15[@]}" "${split[@]}"
one gpu1 trident 1 "${m15[@]}"
one split_2 trident 2 "${m15[@]}" "${split[@]}"
one base_split_2 trident_base 2 "${m15[@]}" "${split[@]}"
t0=$SECONDS
timeout 100 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1
echo "cuda_layouts: exit $? ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
cd "$out" && tar czf all.tgz *.log *.txt
