#!/usr/bin/env bash
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/bundle/trident/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu
out=$1; mkdir -p $out
m=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x TRIDENT_EXP_GATHER_AFTER)
B=bundle/trident/bin
b124(){ local n=$1; shift; "${m[@]}" -np $n $B/trident bench --config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size $((32*n)) --bench.warmup 3 --bench.steps 10 "$@"; }
row(){ grep -A1 "^model" | tail -1; }
nvidia-smi -L
echo "1gpu: $(b124 1 2>&1 | row)"
for i in 1 2; do
  unset TRIDENT_EXP_GATHER_AFTER
  echo "dp2 z1 overlap: $(b124 2 --parallel.zero 1 2>&1 | row)"
  export TRIDENT_EXP_GATHER_AFTER=1
  echo "dp2 z1 after: $(b124 2 --parallel.zero 1 2>&1 | row)"
done
echo "1gpu: $(b124 1 2>&1 | row)"
echo "dp2 z0: $(b124 2 --parallel.zero 0 2>&1 | row)"
b124 2 --parallel.zero 1 --bench.profile --bench.profile_steps 3 > $out/profile_dp2_after.log 2>&1
$B/cuda_tests > $out/cuda_ops.log 2>&1; echo "cuda_tests rc $?"; tail -1 $out/cuda_ops.log
"${m[@]}" -np 2 $B/cuda_layouts > $out/cuda_layouts.log 2>&1; echo "cuda_layouts rc $?"; tail -1 $out/cuda_layouts.log
mkdir -p $out/dump; $B/dump_reference $out/dump cuda 50 > /dev/null 2>&1; python3 tests/reference/check_vs_torch.py $out/dump > $out/torch_check.log 2>&1; echo "torch check rc $?"; tail -2 $out/torch_check.log; rm -rf $out/dump
python3 tools/bench_pytorch.py --batch 32 --seq 1024 --steps 20 2>&1 | tail -1
torchrun --nproc_per_node 2 tools/bench_pytorch.py --batch 32 --seq 1024 --steps 20 2>&1 | tail -1
