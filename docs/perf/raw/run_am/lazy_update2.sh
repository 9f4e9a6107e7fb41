#!/usr/bin/env bash
# Run AM: AdamW deferred to the next forward with a low-priority side stream and 8K-element update pieces (trident) against 1f74574 (trident_old), and the same with TRIDENT_SIDE_STREAM=0.
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/bundle/trident/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu
out=$1; mkdir -p $out
m=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
B=bundle/trident/bin
b124(){ local bin=$1 n=$2; shift 2; "${m[@]}" -np $n $B/$bin bench --config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size $((32*n)) --bench.warmup 3 --bench.steps 10 "$@"; }
row(){ grep -A1 "^model" | tail -1; }
nvidia-smi -L
tools/gpu_checks.sh bundle/trident . $out/chk torch layouts >/dev/null 2>&1; cat $out/chk/summary.txt; tail -2 $out/chk/torch_check.log
for i in 1 2 3; do
  echo "old 1gpu: $(b124 trident_old 1 2>&1 | row)"
  echo "new 1gpu: $(b124 trident 1 2>&1 | row)"
  echo "new 1gpu side off: $(TRIDENT_SIDE_STREAM=0 b124 trident 1 2>&1 | row)"
done
for i in 1 2; do echo "pytorch: $(python3 tools/bench_pytorch.py --batch 32 --seq 1024 --steps 20 2>&1 | tail -1)"; done
for i in 1 2; do
  echo "old dp2 z1: $(b124 trident_old 2 --parallel.zero 1 2>&1 | row)"
  echo "new dp2 z1: $(b124 trident 2 --parallel.zero 1 2>&1 | row)"
done
b124 trident 1 --bench.profile --bench.profile_steps 3 > $out/profile_new.log 2>&1
b124 trident 2 --parallel.zero 1 --bench.profile --bench.profile_steps 3 > $out/profile_new_dp2z1.log 2>&1
echo "new dp2 z0: $(b124 trident 2 2>&1 | row)"
