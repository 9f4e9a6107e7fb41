#!/usr/bin/env bash
# Run AN: dp2 ZeRO-1 GPT-2 124M against the DP bucket size and NCCL's protocol (code 39763f8).
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/bundle/trident/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu
m=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x NCCL_PROTO)
B=bundle/trident/bin
b124(){ local n=$1; shift; "${m[@]}" -np $n $B/trident bench --config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size $((32*n)) --bench.warmup 3 --bench.steps 10 "$@"; }
row(){ grep -A1 "^model" | tail -1; }
nvidia-smi -L
echo "1gpu: $(b124 1 2>&1 | row)"
for mb in 25 12.5 50 100; do echo "dp2 z1 bucket_mb $mb: $(b124 2 --parallel.zero 1 --parallel.bucket_mb $mb 2>&1 | row)"; done
for p in Simple LL128; do echo "dp2 z1 NCCL_PROTO $p: $(NCCL_PROTO=$p b124 2 --parallel.zero 1 2>&1 | row)"; done
echo "dp2 z1 bucket_mb 25 again: $(b124 2 --parallel.zero 1 2>&1 | row)"
echo "1gpu: $(b124 1 2>&1 | row)"
