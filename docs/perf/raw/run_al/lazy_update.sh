#!/usr/bin/env bash
# Run AL: AdamW deferred to the next forward (trident) against the commit before it (trident_old).
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
done
for i in 1 2; do echo "pytorch: $(python3 tools/bench_pytorch.py --batch 32 --seq 1024 --steps 20 2>&1 | tail -1)"; done
for i in 1 2; do
  echo "old dp2 z1: $(b124 trident_old 2 --parallel.zero 1 2>&1 | row)"
  echo "new dp2 z1: $(b124 trident 2 --parallel.zero 1 2>&1 | row)"
  echo "old dp2 z0: $(b124 trident_old 2 2>&1 | row)"
  echo "new dp2 z0: $(b124 trident 2 2>&1 | row)"
done
b124 trident 1 --bench.profile --bench.profile_steps 3 > $out/profile_new.log 2>&1
b124 trident 2 --bench.profile --bench.profile_steps 3 > $out/profile_new_dp2z0.log 2>&1
tr(){ "${m[@]}" -np 2 $B/trident train --config inputs/models/gpt2-124m.cfg --data.train data/fortunes_gpt2 --data.split 0.9 --parallel.dp 2 --train.micro_batch_size 16 --train.global_batch_size 32 --log.every 10 --train.eval_every 20 --checkpoint.every 20 --checkpoint.dir $out/ck "$@"; }
tr --train.steps 40 > $out/train_dp2.log 2>&1; echo "train dp2 rc $?"; grep -i "step\|val" $out/train_dp2.log | tail -6
tr --train.steps 50 > $out/train_dp2_resume.log 2>&1; echo "resume rc $?"; grep -i "step\|val\|resum" $out/train_dp2_resume.log | tail -4; rm -rf $out/ck
