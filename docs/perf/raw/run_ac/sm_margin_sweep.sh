#!/usr/bin/env bash
# dp2 / tp2 sweep: GEMM SM margin x NCCL CTA limit
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/bundle/trident/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu
out=$1; mkdir -p $out
m=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x TRIDENT_GEMM_SM_MARGIN -x NCCL_MAX_CTAS -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS)
B=bundle/trident/bin/trident
b124(){ local n=$1; shift; "${m[@]}" -np $n $B bench --config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size $((32*n)) --bench.warmup 3 --bench.steps 10 "$@"; }
b15(){ local n=$1; shift; "${m[@]}" -np $n $B bench --config inputs/models/gpt2-1.5b-tp.cfg --train.micro_batch_size 8 --train.global_batch_size 64 --bench.warmup 2 --bench.steps 4 "$@"; }
row(){ grep -A1 "^model" | tail -1; }
nvidia-smi -L
echo "1gpu: $(b124 1 2>&1 | row)"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING b124 2 --parallel.zero 1 > $out/nccl_info.log 2>&1; echo "dp2 z1 default (info run): $(row < $out/nccl_info.log)"
for cfg in "0 -" "16 16" "8 8" "16 -" "24 -" "4 4"; do
  set -- $cfg
  if [[ $2 == - ]]; then unset NCCL_MAX_CTAS; else export NCCL_MAX_CTAS=$2; fi
  export TRIDENT_GEMM_SM_MARGIN=$1
  echo "dp2 z1 margin $1 ctas $2: $(b124 2 --parallel.zero 1 2>&1 | row)"
  echo "dp2 z0 margin $1 ctas $2: $(b124 2 --parallel.zero 0 2>&1 | row)"
done
unset NCCL_MAX_CTAS; export TRIDENT_GEMM_SM_MARGIN=0
echo "1gpu again: $(b124 1 2>&1 | row)"
echo "1.5b 1gpu: $(b15 1 2>&1 | row)"
echo "1.5b tp2 margin 0: $(b15 2 --parallel.tp 2 2>&1 | row)"
TRIDENT_GEMM_SM_MARGIN=16 echo "1.5b tp2 margin 16: $(TRIDENT_GEMM_SM_MARGIN=16 b15 2 --parallel.tp 2 2>&1 | row)"
echo "1.5b tp2 margin 16 ctas 16: $(TRIDENT_GEMM_SM_MARGIN=16 NCCL_MAX_CTAS=16 b15 2 --parallel.tp 2 2>&1 | row)"
