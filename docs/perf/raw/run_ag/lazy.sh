#!/usr/bin/env bash
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/bundle/trident/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu
out=$1; mkdir -p $out
m=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
B=bundle/trident/bin
b124(){ local bin=$1 n=$2; shift 2; "${m[@]}" -np $n $B/$bin bench --config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size $((32*n)) --bench.warmup 3 --bench.steps 10 "$@"; }
row(){ grep -A1 "^model" | tail -1; }
nvidia-smi -L
echo "1gpu: $(b124 trident 1 2>&1 | row)"
for i in 1 2; do
  echo "prev dp2 z1: $(b124 trident_prev 2 --parallel.zero 1 2>&1 | row)"
  echo "lazy dp2 z1: $(b124 trident 2 --parallel.zero 1 2>&1 | row)"
done
echo "1gpu: $(b124 trident 1 2>&1 | row)"
echo "lazy dp2 z0: $(b124 trident 2 --parallel.zero 0 2>&1 | row)"
b124 trident 2 --parallel.zero 1 --bench.profile --bench.profile_steps 3 > $out/profile_dp2_lazy.log 2>&1
"${m[@]}" -np 2 $B/cuda_layouts > $out/cuda_layouts.log 2>&1; echo "cuda_layouts rc $?"; tail -1 $out/cuda_layouts.log
tr(){ "${m[@]}" -np 2 $B/trident train --config inputs/models/gpt2-124m.cfg --data.train data/fortunes_gpt2 --data.split 0.9 --parallel.dp 2 --parallel.zero 1 --train.micro_batch_size 16 --train.global_batch_size 32 --log.every 10 --train.eval_every 20 --checkpoint.every 20 --checkpoint.dir $out/ck "$@"; }
tr --train.steps 40 > $out/train_z1.log 2>&1; echo "train z1 rc $?"; grep -i "step\|val" $out/train_z1.log | tail -8
tr --train.steps 50 > $out/train_z1_resume.log 2>&1; echo "resume rc $?"; grep -i "step\|val\|resum" $out/train_z1_resume.log | tail -5; rm -rf $out/ck
