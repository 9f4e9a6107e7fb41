#!/usr/bin/env bash
# Run BK: PeerLink and CopyLink moved to peer_link.cpp over one PeerFlags helper (same protocol,
# same copies): cuda_tests, cuda_layouts (fused TP sums, split LayerNorm backward and the DP copy
# engines against their reference paths), and the benches of both paths against the previous
# commit's binary (trident_base, 7c807ea), alternating.
#   docs/perf/raw/run_bk/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m124=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --bench.warmup 5 --bench.steps 30
      --train.global_batch_size 64 --parallel.zero 1 --parallel.dp_copy_engine true)
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
t0=$SECONDS
timeout 200 "$b/bin/cuda_tests" >"$out/cuda_tests.log" 2>&1
echo "cuda_tests: exit $? $(grep -E 'PASSED|FAILED' "$out/cuda_tests.log" | head -3 | tr '\n' ' ') ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
one ce_new trident 2 "${m124[@]}"
one ce_base trident_base 2 "${m124[@]}"
one split_new trident 2 "${m15[@]}"
one split_base trident_base 2 "${m15[@]}"
one ce_new_2 trident 2 "${m124[@]}"
one ce_base_2 trident_base 2 "${m124[@]}"
cd "$out" && tar czf all.tgz *.log *.txt
