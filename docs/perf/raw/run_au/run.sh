#!/usr/bin/env bash
# Run AU: as run AT, with the all-gathers of sequence parallelism beside the own-rows half of the GEMM
# that reads them (forward: qkv, fc; backward: fcproj and proj input gradients): tp2 and tp2 + SP.
#   docs/perf/raw/run_au/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m15=(--config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64
     --bench.warmup 2 --bench.steps 6 --bench.profile --bench.profile_steps 1)
one() {  # name, ranks, bench arguments...
  local name=$1 n=$2; shift 2
  timeout 200 "${mp[@]}" -np "$n" "$b/bin/trident" bench "${m15[@]}" "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -A1 '^model' "$out/$name.log" | tail -1 | awk '{print $9, $10, $NF}')" | tee -a "$out/summary.txt"
}
timeout 150 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1; echo "cuda_layouts: exit $?" | tee -a "$out/summary.txt"
one gpu1 1
one tp2 2 --parallel.tp 2
one tp2_sp 2 --parallel.tp 2 --parallel.sequence_parallel true
one tp2_sp_again 2 --parallel.tp 2 --parallel.sequence_parallel true
