#!/usr/bin/env bash
# The multi-GPU runs of the 3D-parallel issue on one node of N GPUs (4 or 8), from a bundle:
# doctor; GPT-2 774M in tp2 x pp2 (1F1B) against dp2 x tp2 (ZeRO-1) at the same global batch;
# a checkpoint saved in tp2 x pp2 resumed in dp-only and tp-only layouts; a GPT-2 124M
# data-parallel scaling sweep over 1, 2, ... N GPUs (summary.csv).
#   tools/gpu_3d.sh BUNDLE_DIR REPO_ROOT OUT_DIR GPUS
set -uo pipefail
bundle=$(cd "${1:?usage: gpu_3d.sh BUNDLE_DIR REPO_ROOT OUT_DIR GPUS}" && pwd)
root=$(cd "${2:?}" && pwd)
out=${3:?}
gpus=${4:?}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mpirun=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
t=$bundle/bin/trident
run() {   # name, ranks, trident args...
  local name=$1 np=$2
  shift 2
  local t0=$SECONDS
  timeout 400 "${mpirun[@]}" -np "$np" "$t" "$@" >"$out/$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
}
m774=(--config "$root/inputs/models/gpt2-774m.cfg" --data.train "$root/data/fortunes_gpt2" --train.steps 20
      --train.micro_batch_size 4 --train.global_batch_size 16 --train.warmup_steps 5 --log.every 5)
run doctor "$gpus" doctor --config "$root/inputs/models/gpt2-774m.cfg" --data.train "$root/data/fortunes_gpt2" \
  --parallel.tp 2 --parallel.pp 2 --checkpoint.dir "$out/doctor_ck"
run m774_tp2pp2 4 train "${m774[@]}" --parallel.tp 2 --parallel.pp 2 --checkpoint.dir "$out/ck" --checkpoint.every 10 \
  --checkpoint.keep 2 --log.metrics "$out/m774_tp2pp2.jsonl"
run m774_dp2tp2 4 train "${m774[@]}" --parallel.tp 2 --parallel.zero 1 --log.metrics "$out/m774_dp2tp2.jsonl"
run m774_resume_dp4 4 train "${m774[@]}" --parallel.zero 1 --checkpoint.resume "$out/ck/step_10.h5" \
  --log.metrics "$out/m774_resume_dp4.jsonl"
run m774_resume_tp4 4 train "${m774[@]}" --parallel.tp 4 --checkpoint.resume "$out/ck/step_10.h5" \
  --log.metrics "$out/m774_resume_tp4.jsonl"
python3 - "$out" <<'PY' | tee -a "$out/summary.txt"
import json, sys
d = sys.argv[1]
def losses(name):
    return {r["step"]: r["loss"] for r in map(json.loads, open(f"{d}/{name}.jsonl"))}
ref = losses("m774_tp2pp2")
for other in ("m774_dp2tp2", "m774_resume_dp4", "m774_resume_tp4"):
    o = losses(other)
    worst = max(abs(o[s] - ref[s]) / ref[s] for s in o)
    print(f"{other}: steps {min(o) + 1}-{max(o) + 1} worst loss rel diff to tp2 x pp2: {worst:.2e}")
print("tp2 x pp2 losses: " + " ".join(f"{ref[s]:.3f}" for s in sorted(ref)))
PY
echo "gpus,tokens_per_s,step_ms,efficiency" >"$out/summary.csv"
base=""
for n in 1 2 4 8; do
  (( n > gpus )) && break
  run "bench124m_${n}gpu" "$n" bench --config "$root/inputs/models/gpt2-124m.cfg" --train.micro_batch_size 32 \
    --train.global_batch_size $((32 * n)) --bench.warmup 3 --bench.steps 10
  read -r tok ms < <(awk '/^L12C768/ {print $9, $10}' "$out/bench124m_${n}gpu.log")
  [[ -z $base ]] && base=$tok
  echo "$n,$tok,$ms,$(python3 -c "print(round($tok / ($n * $base), 4))")" >>"$out/summary.csv"
done
cat "$out/summary.csv"
