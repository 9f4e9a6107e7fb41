#!/usr/bin/env bash
# Run BN: PeerLink::release writes the freed flag from a flag stream after an event instead of
# on the compute stream (run BM: a stream memory operation costs a compute stream ~1.5 us, an
# event wait ~0.4). cuda_layouts, then the 1.5B-class tp2 (fused + split) against the previous
# commit's binary (trident_base), alternating.
#   docs/perf/raw/run_bn/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6 --parallel.tp 2 --parallel.tp_overlap true --parallel.tp_fused_sum true
     --parallel.tp_split_layernorm_bwd true)
row() { grep -A1 '^model' "$1" | tail -1 | awk '{print $9, $10, $NF}'; }
one() {  # name, binary, ranks, bench arguments...
  local name=$1 bin=$2 n=$3 t0=$SECONDS; shift 3
  timeout 150 "${mp[@]}" -np "$n" "$b/bin/$bin" bench "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(row "$out/$name.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
t0=$SECONDS
timeout 150 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1
echo "cuda_layouts: exit $? ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
one split_new_1 trident 2 "${m15[@]}"
one split_base_1 trident_base 2 "${m15[@]}"
one split_new_2 trident 2 "${m15[@]}"
one split_base_2 trident_base 2 "${m15[@]}"
cd "$out" && tar czf all.tgz *.log *.txt
