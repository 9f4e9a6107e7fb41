#!/usr/bin/env bash
# Runs the GPU checks and measurements from a bundle (tools/bundle.sh --with-tests) on a GPU node,
# one log per check in OUT_DIR.
#   tools/gpu_checks.sh BUNDLE_DIR REPO_ROOT OUT_DIR [checks...]
# correctness: ops (CUDA ops vs CPU), ops_mma (the same with the mma.sync attention kernels that
#   sm_90a machines skip), layouts (one step vs CPU, 2-GPU layouts vs 1 GPU), torch
#   (50-step loss trace vs PyTorch; needs python3 with torch), launch (bad launches, stalled rank),
#   train124m (GPT-2 124M on 2 GPUs, loss falling), generate (checkpoint -> text), doctor,
#   tensorboard (log.tensorboard of a GPU run read back by TensorBoard's EventAccumulator; needs python3
#   with tensorboard), nvtx (ncu --nvtx --nvtx-include selects kernels by the NVTX range names of a
#   training step: optimizer, forward, and on 2 GPUs the dp all-reduce; needs ncu)
# measurements: bench (trident bench, GPT-2 124M B=32 T=1024 on 1 and 2 GPUs, the latter with ZeRO 0
#   and 1), pytorch (the same
#   with tools/bench_pytorch.py; pytorch_ab: its 1-GPU run twice through this script's wrapper and
#   twice started plainly, alternating), kernels (trident bench --bench.kernels; kernels_mma: with the
#   mma.sync attention kernels), ckpt (save/load GB/s), dp2_ab (1 GPU and dp2 ZeRO-1 alternating,
#   five runs each, and the scaling of the means),
#   profile (bench with the per-op GPU time table, 1 and 2 GPUs), sdpa (PyTorch SDPA attention
#   kernels, the shapes of `kernels`), scaling15 (1.5B-class model: 1 GPU vs tp2 (also with parallel.tp_overlap,
#   SM margin 8 and 8 TP CTAs, and with tp_overlap + tp_fused_sum + tp_split_layernorm_bwd) vs pp2 1F1B
#   with 8 micro-batches at the same global batch), ncu (Nsight Compute sections of the attention
#   kernels at GPT-2's shape, the fused LayerNorm backward and the fused cross-entropy, from
#   `trident bench --bench.kernels`; needs ncu and a runtime that lets it read the counters)
# default: the correctness checks
set -uo pipefail
bundle=$(cd "${1:?usage: gpu_checks.sh BUNDLE_DIR REPO_ROOT OUT_DIR [checks...]}" && pwd)
root=$(cd "${2:?}" && pwd)
out=${3:?}
shift 3
checks=("$@")
(( ${#checks[@]} )) || checks=(ops layouts torch launch train124m generate doctor)
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
mpirun=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin=$bundle/bin
status=0
# The 2-GPU halves of bench, pytorch and profile run where the machine has two GPUs.
gpus=$(nvidia-smi -L | wc -l)
counts=(1)
(( gpus >= 2 )) && counts=(1 2)
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
    ops_mma) run cuda_ops_mma 300 env TRIDENT_ATTENTION_KERNELS=mma "$bin/cuda_tests" ;;
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
    generate)
      run generate_train 300 "${mpirun[@]}" -np 2 "$bin/trident" train --config "$root/inputs/models/gpt2-124m.cfg" \
        --data.train "$root/data/fortunes_gpt2" --parallel.dp 2 --train.steps 30 --train.micro_batch_size 8 \
        --train.global_batch_size 16 --train.warmup_steps 5 --log.every 10 --checkpoint.dir "$out/gen_ck"
      run generate_greedy 120 "${mpirun[@]}" -np 2 "$bin/trident" generate --checkpoint "$out/gen_ck/step_30.h5" \
        --parallel.tp 2 --prompt "The meaning of life is" --temperature 0 --max-new-tokens 40 \
        --vocab "$root/data/gpt2/encoder.json" --merges "$root/data/gpt2/vocab.bpe"
      run generate_sampled 120 "${mpirun[@]}" -np 1 "$bin/trident" generate --checkpoint "$out/gen_ck/step_30.h5" \
        --prompt "Q: Why" --temperature 0.8 --top-k 40 --max-new-tokens 40 \
        --vocab "$root/data/gpt2/encoder.json" --merges "$root/data/gpt2/vocab.bpe" ;;
    tensorboard)
      run tensorboard_train 300 "${mpirun[@]}" -np "${counts[-1]}" "$bin/trident" train \
        --config "$root/inputs/models/gpt2-124m.cfg" --data.train "$root/data/fortunes_gpt2" --data.split 0.95 \
        --train.steps 20 --train.micro_batch_size 8 --train.global_batch_size $((8 * counts[-1])) --train.eval_every 10 \
        --train.eval_steps 2 --log.every 5 --log.metrics "$out/tensorboard.jsonl" --log.tensorboard "$out/tensorboard"
      run tensorboard_read 120 python3 "$root/tests/cuda/tensorboard_accumulator.py" "$out/tensorboard" \
        "$out/tensorboard.jsonl" ;;
    nvtx)
      # Each range must select at least one kernel of its own: AdamW in optimizer, the embedding or a
      # LayerNorm in forward, NCCL's all-reduce kernel in "dp all-reduce".
      ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
      tiny=(train --config "$root/inputs/models/gpt2-124m.cfg" --data.train "$root/data/fortunes_gpt2" --model.n_layer 2
            --train.steps 2 --train.micro_batch_size 2)
      run nvtx_optimizer 300 "$ncu_bin" --nvtx --nvtx-include "optimizer/" --launch-count 1 --section LaunchStats \
        "$bin/trident" "${tiny[@]}" --train.global_batch_size 2
      run nvtx_forward 300 "$ncu_bin" --nvtx --nvtx-include "forward/" --launch-count 3 --section LaunchStats \
        "$bin/trident" "${tiny[@]}" --train.global_batch_size 2
      grep -qi adamw "$out/nvtx_optimizer.log" || { echo "nvtx: no AdamW kernel in range optimizer" | tee -a "$out/summary.txt"; status=1; }
      grep -qi "encoder\|layernorm" "$out/nvtx_forward.log" ||
        { echo "nvtx: no embedding or LayerNorm kernel in range forward" | tee -a "$out/summary.txt"; status=1; }
      if (( gpus >= 2 )); then
        run nvtx_dp 300 "${mpirun[@]}" -np 2 "$ncu_bin" --nvtx --nvtx-include "dp all-reduce/" --launch-count 1 \
          --section LaunchStats "$bin/trident" "${tiny[@]}" --train.global_batch_size 4
        grep -q "ncclDevKernel_AllReduce" "$out/nvtx_dp.log" || { echo "nvtx: no NCCL kernel in range dp all-reduce" | tee -a "$out/summary.txt"; status=1; }
      fi ;;
    doctor)
      run doctor 120 "${mpirun[@]}" -np 2 "$bin/trident" doctor --config "$root/inputs/models/gpt2-124m.cfg" \
        --data.train "$root/data/fortunes_gpt2" --parallel.tp 2 --checkpoint.dir "$out/doctor_ck" ;;
    bench)
      for n in "${counts[@]}"; do
        run "bench124m_${n}gpu" 300 "${mpirun[@]}" -np "$n" "$bin/trident" bench --config "$root/inputs/models/gpt2-124m.cfg" \
          --train.micro_batch_size 32 --train.global_batch_size $((32 * n)) --bench.warmup 3 --bench.steps 10
      done
      (( gpus >= 2 )) && run bench124m_2gpu_zero1 300 "${mpirun[@]}" -np 2 "$bin/trident" bench \
        --config "$root/inputs/models/gpt2-124m.cfg" --train.micro_batch_size 32 --train.global_batch_size 64 \
        --bench.warmup 3 --bench.steps 10 --parallel.zero 1 ;;
    dp2_ab)
      # Target 2's ratio with the lease's drift averaged out: 1-GPU and dp2 ZeRO-1 runs alternate
      # five times each (30 timed steps per run); scaling = mean dp2 rate / (2 x mean 1-GPU rate).
      (( gpus >= 2 )) || { echo "dp2_ab: needs 2 GPUs" | tee -a "$out/summary.txt"; status=1; continue; }
      for i in 1 2 3 4 5; do
        for n in 1 2; do
          run "dp2_ab_${n}gpu_$i" 300 "${mpirun[@]}" -np "$n" "$bin/trident" bench --config "$root/inputs/models/gpt2-124m.cfg" \
            --train.micro_batch_size 32 --train.global_batch_size $((32 * n)) --bench.warmup 5 --bench.steps 30 \
            --parallel.zero 1
        done
      done
      for i in 1 2 3 4 5; do
        for n in 1 2; do grep -A1 "^model" "$out/dp2_ab_${n}gpu_$i.log" | tail -1 | awk -v n=$n '{print n, $9}'; done
      done | awk '{s[$1] += $2; c[$1]++; printf "%s GPU: %d tok/s\n", $1, $2}
                  END {if (c[1] && c[2]) printf "dp2 scaling: %.1f%% (mean %d of %d runs / 2 x mean %d of %d runs)\n",
                       100 * s[2] / c[2] / (2 * s[1] / c[1]), s[2] / c[2], c[2], s[1] / c[1], c[1]}' \
        | tee "$out/dp2_ab.txt" ;;
    pytorch)
      run pytorch124m_1gpu 300 python3 "$root/tools/bench_pytorch.py" --batch 32 --seq 1024 --steps 20
      (( gpus >= 2 )) && run pytorch124m_2gpu 300 torchrun --nproc_per_node 2 "$root/tools/bench_pytorch.py" --batch 32 --seq 1024 --steps 20 ;;
    pytorch_ab)
      # The 1-GPU PyTorch baseline twice each way, alternating: started as `pytorch` does (through
      # run(): timeout, this script's LD_LIBRARY_PATH) and started plainly. In the fourth session
      # the first way gave 487-504K tok/s and the second 523-525K on H200 (docs/PERFORMANCE.md).
      for i in 1 2; do
        run "pytorch_wrapped_$i" 300 python3 "$root/tools/bench_pytorch.py" --batch 32 --seq 1024 --steps 20
        (unset LD_LIBRARY_PATH; python3 "$root/tools/bench_pytorch.py" --batch 32 --seq 1024 --steps 20) \
          >"$out/pytorch_plain_$i.log" 2>&1
        echo "pytorch_plain_$i: exit $?" | tee -a "$out/summary.txt"
      done ;;
    kernels) run kernels 300 "$bin/trident" bench --bench.kernels ;;
    kernels_mma) run kernels_mma 300 env TRIDENT_ATTENTION_KERNELS=mma "$bin/trident" bench --bench.kernels ;;
    profile)
      for n in "${counts[@]}"; do
        run "profile124m_${n}gpu" 300 "${mpirun[@]}" -np "$n" "$bin/trident" bench --config "$root/inputs/models/gpt2-124m.cfg" \
          --train.micro_batch_size 32 --train.global_batch_size $((32 * n)) --bench.warmup 3 --bench.steps 5 \
          --bench.profile --bench.profile_steps 3
      done ;;
    ncu)
      ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
      sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats
                --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis)
      # The first attention launches are HS 64, T 1024: forward, backward preprocessing, dK/dV, dQ.
      run ncu_attention 300 "$ncu_bin" --clock-control none -k regex:attention --launch-count 4 "${sections[@]}" \
        "$bin/trident" bench --bench.kernels
      run ncu_memory 300 "$ncu_bin" --clock-control none -k "regex:layernorm_bwd_fused|xent_fused" --launch-count 2 \
        "${sections[@]}" "$bin/trident" bench --bench.kernels ;;
    sdpa) run sdpa 300 python3 "$root/tools/bench_pytorch.py" --attention ;;
    scaling15)
      m15=(--config "$root/inputs/models/gpt2-1.5b-tp.cfg" --train.micro_batch_size 8 --train.global_batch_size 64
           --bench.warmup 2 --bench.steps 4 --bench.profile --bench.profile_steps 1)
      # --bind-to none: the OpenMP parameter initialisation of 1.44B parameters then uses every
      # core (bound to one core it takes over two minutes).
      run scaling15_1gpu 400 "${mpirun[@]}" --bind-to none -np 1 "$bin/trident" bench "${m15[@]}"
      run scaling15_tp2 400 "${mpirun[@]}" --bind-to none -np 2 "$bin/trident" bench "${m15[@]}" --parallel.tp 2
      run scaling15_tp2_overlap 400 "${mpirun[@]}" --bind-to none -np 2 "$bin/trident" bench "${m15[@]}" --parallel.tp 2 \
        --parallel.tp_overlap true --parallel.tp_sm_margin 8 --parallel.tp_comm_ctas 8
      run scaling15_tp2_fused 400 "${mpirun[@]}" --bind-to none -np 2 "$bin/trident" bench "${m15[@]}" --parallel.tp 2 \
        --parallel.tp_overlap true --parallel.tp_fused_sum true --parallel.tp_split_layernorm_bwd true
      run scaling15_pp2 400 "${mpirun[@]}" --bind-to none -np 2 "$bin/trident" bench "${m15[@]}" --parallel.pp 2 \
        --parallel.schedule 1f1b ;;
    ckpt)
      for m in gpt2-124m gpt2-350m; do
        for steps in 1 2; do   # the second run loads the first run's checkpoint, then saves its own
          run "ckpt_${m}_$steps" 300 "${mpirun[@]}" -np 2 "$bin/trident" train --config "$root/inputs/models/$m.cfg" \
            --data.train "$root/data/fortunes_gpt2" --parallel.dp 2 --train.steps "$steps" --train.micro_batch_size 4 \
            --train.global_batch_size 8 --checkpoint.dir "$out/ckpt_$m"
        done
      done ;;
    *) echo "unknown check $c"; status=1 ;;
  esac
done
exit $status
