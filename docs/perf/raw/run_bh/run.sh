#!/usr/bin/env bash
# Run BH: the final code's GPU checks (cuda_tests, cuda_layouts), and, where Nsight Systems is
# installed, kernel timelines of GPT-2 124M on 1 GPU and on dp2 ZeRO-1 with the copy engines
# (rank 0): is the dp2 step's ~3% kernel slowdown in the kernels' own durations or in gaps
# between them? (kernels.py: GPU busy share and mean duration per kernel over the steady state.)
#   docs/perf/raw/run_bh/run.sh BUNDLE OUT
b=$1 out=$2
here=$(dirname "$0")
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu"
mp=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
m124=(--config inputs/models/gpt2-124m.cfg --train.micro_batch_size 32 --bench.warmup 5 --bench.steps 20
      --bench.profile_steps 0)
row() { grep -A1 '^model' "$1" | tail -1 | awk '{print $9, $10, $NF}'; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpus.txt"
t0=$SECONDS
timeout 150 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" >"$out/cuda_layouts.log" 2>&1
echo "cuda_layouts: exit $? ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
t0=$SECONDS
timeout 200 "$b/bin/cuda_tests" >"$out/cuda_tests.log" 2>&1
echo "cuda_tests: exit $? $(grep -E 'PASSED|FAILED' "$out/cuda_tests.log" | head -3 | tr '\n' ' ') ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${nsys:-not found}" | tee -a "$out/summary.txt"
if [ -n "$nsys" ]; then
  t0=$SECONDS
  timeout 200 "${mp[@]}" -np 1 "$nsys" profile --trace=cuda --sample=none --cpuctxsw=none -o "$out/g1" -f true \
    "$b/bin/trident" bench "${m124[@]}" --train.global_batch_size 32 >"$out/g1.log" 2>&1
  echo "g1 (nsys): exit $? $(row "$out/g1.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
  t0=$SECONDS
  timeout 200 "${mp[@]}" -np 2 bash -c "if [ \$OMPI_COMM_WORLD_RANK = 0 ]; then exec $nsys profile --trace=cuda --sample=none --cpuctxsw=none -o $out/ce -f true \"\$@\"; else exec \"\$@\"; fi" _ \
    "$b/bin/trident" bench "${m124[@]}" --train.global_batch_size 64 --parallel.zero 1 --parallel.dp_copy_engine true \
    >"$out/ce.log" 2>&1
  echo "ce (nsys): exit $? $(row "$out/ce.log") ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
  for r in g1 ce; do
    [ -f "$out/$r.nsys-rep" ] || continue
    timeout 120 "$nsys" export --type sqlite -o "$out/$r.sqlite" -f true "$out/$r.nsys-rep" >/dev/null 2>&1
    (unset LD_LIBRARY_PATH; timeout 60 python3 "$here/kernels.py" "$out/$r.sqlite" 30) >"$out/kernels_$r.txt" 2>&1
    head -1 "$out/kernels_$r.txt" | sed "s/^/$r: /" | tee -a "$out/summary.txt"
  done
fi
cd "$out" && tar czf all.tgz *.log *.txt
