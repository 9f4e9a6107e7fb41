#!/usr/bin/env bash
# Run BA: GPT-2 124M on 1 GPU, the seventh session's last commit (eef17f3, trident_base) against
# this session's code, alternating three times each, then the PyTorch baseline once more: did
# anything of this session move target 1?
#   docs/perf/raw/run_ba/run.sh BUNDLE OUT
b=$1 out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m124=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --train.global_batch_size 32
      --bench.warmup 5 --bench.steps 30)
one() {  # name, binary
  local name=$1 bin=$2 t0=$SECONDS
  timeout 120 "${mp[@]}" -np 1 "$b/bin/$bin" bench "${m124[@]}" >"$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -A1 '^model' "$out/$name.log" | tail -1 | awk '{print $9, $10}') ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
for i in 1 2 3; do
  one "base_$i" trident_base
  one "new_$i" trident
done
t0=$SECONDS
(unset LD_LIBRARY_PATH; timeout 240 python3 tools/bench_pytorch.py --batch 32 --seq 1024 --steps 20) >"$out/pytorch124m_1gpu.log" 2>&1
echo "pytorch124m_1gpu: exit $? $(grep -iE 'tok' "$out/pytorch124m_1gpu.log" | tail -1) ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
cd "$out" && tar czf all.tgz *.log *.txt
