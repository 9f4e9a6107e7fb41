#!/usr/bin/env bash
# Runs the GPU checks from a bundle (tools/bundle.sh --with-tests) on a GPU node, one log per
# check in OUT_DIR: CUDA ops vs CPU, one step vs CPU and 2-GPU layouts vs 1 GPU, the 50-step
# loss trace vs PyTorch (needs python3 with torch), bad launches, and a GPT-2 124M run.
#   tools/gpu_checks.sh BUNDLE_DIR REPO_ROOT OUT_DIR [checks...]
# checks: ops layouts torch launch train124m (default: all)
set -uo pipefail
bundle=$(cd "${1:?usage: gpu_checks.sh BUNDLE_DIR REPO_ROOT OUT_DIR [checks...]}" && pwd)
root=$(cd "${2:?}" && pwd)
out=${3:?}
shift 3
checks=("$@")
(( ${#checks[@]} )) || checks=(ops layouts torch launch train124m)
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
mpirun=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin=$bundle/bin
status=0
run() {   # name, timeout seconds, command...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
  (( rc == 0 )) || status=1
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpus.txt"
for c in "${checks[@]}"; do
  case $c in
    ops) run cuda_ops 300 "$bin/cuda_tests" ;;
    layouts) run cuda_layouts 300 "${mpirun[@]}" -np 2 "$bin/cuda_layouts" ;;
    torch)
      mkdir -p "$out/dump"
      run torch_dump 120 "$bin/dump_reference" "$out/dump" cuda 50
      run torch_check 300 python3 "$root/tests/reference/check_vs_torch.py" "$out/dump" ;;
    launch) run launch_checks 300 "$root/tests/cuda/launch_checks.sh" "$bin/trident" "$root" "${mpirun[@]}" ;;
    train124m)
      run train124m_dp2 400 "${mpirun[@]}" -np 2 "$bin/trident" train --config "$root/inputs/models/gpt2-124m.cfg" \
        --data.train "$root/data/fortunes_gpt2" --parallel.dp 2 --train.steps 60 --train.micro_batch_size 16 \
        --train.global_batch_size 32 --train.warmup_steps 10 --log.every 5 --log.metrics "$out/train124m_dp2.jsonl" ;;
    *) echo "unknown check $c"; status=1 ;;
  esac
done
exit $status
