#!/usr/bin/env bash
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/bundle/trident/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu
out=$1; mkdir -p $out
m=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
B=bundle/trident/bin
b124(){ local n=$1; shift; "${m[@]}" -np $n $B/trident bench --config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size $((32*n)) --bench.warmup 3 --bench.steps 10 "$@"; }
row(){ grep -A1 "^model" | tail -1; }
nvidia-smi -L
echo "1gpu: $(b124 1 2>&1 | row)"
echo "dp2 z1: $(b124 2 --parallel.zero 1 2>&1 | row)"
echo "dp2 z0: $(b124 2 --parallel.zero 0 2>&1 | row)"
echo "1gpu: $(b124 1 2>&1 | row)"
echo "dp2 z1: $(b124 2 --parallel.zero 1 2>&1 | row)"
b124 2 --parallel.zero 1 --bench.profile --bench.profile_steps 3 > $out/profile_dp2.log 2>&1
b124 1 --bench.profile --bench.profile_steps 3 > $out/profile_1gpu.log 2>&1
"${m[@]}" -np 2 $B/cuda_layouts > $out/cuda_layouts.log 2>&1; echo "cuda_layouts rc $?"; tail -2 $out/cuda_layouts.log
python3 tools/bench_pytorch.py --batch 32 --seq 1024 --steps 20 2>&1 | tail -1
torchrun --nproc_per_node 2 tools/bench_pytorch.py --batch 32 --seq 1024 --steps 20 2>&1 | tail -1
