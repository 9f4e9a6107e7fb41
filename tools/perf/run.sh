#!/usr/bin/env bash
# The one entry point of trident's measurement tools (docs/PERFORMANCE.md says which command gives
# which number):
#   tools/perf/run.sh checks BUNDLE OUT CHECK...   GPU checks and measurements from a bundle
#                                                   (tools/bundle.sh --with-tests) on a GPU node
#   tools/perf/run.sh sweep [options] LAYOUT...    `trident train` tokens/s over layouts (sweep.sh)
#   tools/perf/run.sh pytorch [ARGS...]            the PyTorch baseline (bench_pytorch.py)
#   tools/perf/run.sh trace TRACE.csv [...]        summary of a kernel timeline (kernel_trace.py)
# `checks` writes OUT/summary.txt (one line per run), OUT/gpus.txt and OUT/logs.tgz, and exits 1
# if any run failed. Its checks:
#   correctness: ops (CUDA ops against the CPU backend), ops_mma (the same with the mma.sync
#     attention kernels that sm_90a machines skip), layouts (one step against CPU, 2-GPU layouts
#     against 1 GPU), torch (50-step loss trace against PyTorch), launch (bad launches, stalled
#     rank), train124m (GPT-2 124M on 2 GPUs, loss falling), generate (checkpoint -> text),
#     tensorboard (a GPU run's log.tensorboard read back by TensorBoard's EventAccumulator), nvtx
#     (ncu --nvtx --nvtx-include selects kernels by the NVTX range names), doctor, ckpt (save/load GB/s), 3d (4+ GPUs: GPT-2 774M in tp2 x pp2 against dp2 x tp2, and
#     a tp2 x pp2 checkpoint resumed as dp4 and tp4)
#   measurements: vs_pytorch (124M on 1 GPU twice around PyTorch's run), dp2 (124M on each GPU
#     alone, then dp2 ZeRO-1 twice, and PyTorch DDP), dp_scaling (124M ZeRO-1 on 1, 2, 4, 8 GPUs
#     up to the node's count: OUT/dp_scaling.csv), tp2 and pp2 (the 1.44B model on 1 GPU, then
#     tp2 or pp2 1F1B at the same global batch), nodes2x2 (4 GPUs as two emulated nodes of 2:
#     tp2 x dp2 and tp2 x pp2 across them and on one node, the doctor's bandwidths, trident plan
#     --gpus-per-node 2), llama_peers (the PyTorch peers of the Llama
#     benchmarks: Llama-3.2-1B on 1 GPU; Llama-3-8B under FSDP2 on 4 GPUs, or on 2 with its layers
#     cut to LLAMA8B_LAYERS, 16 unless set; LLAMA8B_AC=full checkpoints its activations),
#     attention (trident's kernels and PyTorch SDPA on the same shapes), kernels, kernels_mma,
#     transformers (Hugging Face transformers loads trident's exports and trident converts its
#     save_pretrained output, logits compared), convert8b (trident convert of the full Llama-3-8B
#     shape on 1 and 4 ranks: seconds per run in the summary), profile (the per-op table of the
#     124M step), trace (its kernel timeline), ncu (Nsight Compute sections of the attention,
#     LayerNorm backward and cross-entropy kernels; needs ncu and counter access)
# Default checks: the correctness checks that run on 2 GPUs.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() { sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
(( $# )) || usage
command=$1
shift
case $command in
  sweep) exec "$here/sweep.sh" "$@" ;;
  pytorch) exec python3 "$here/bench_pytorch.py" "$@" ;;
  trace) exec python3 "$here/kernel_trace/kernel_trace.py" "$@" ;;
  checks) ;;
  -h | --help) usage ;;
  *) echo "run.sh: unknown command '$command' (checks, sweep, pytorch or trace)" >&2; exit 2 ;;
esac
(( $# >= 2 )) || { echo "run.sh checks: give BUNDLE_DIR OUT_DIR [CHECK...]" >&2; exit 2; }
[[ -x $1/bin/trident ]] || { echo "run.sh checks: $1/bin/trident not found; build one with make bundle" >&2; exit 2; }
source "$here/lib.sh" "$1" "$2"
shift 2
checks=("$@")
(( ${#checks[@]} )) || checks=(ops layouts torch launch train124m generate doctor)
bin=$b/bin/trident
gpus=$(nvidia-smi -L | wc -l)
g124=("${m124[@]}" --train.global_batch_size 32)
data=(--data.train "$root/data/fortunes_gpt2")

need_gpus() {  # check name, GPUs it needs
  (( gpus >= $2 )) && return 0
  echo "$1: needs $2 GPUs, the node has $gpus" | tee -a "$dest/summary.txt"
  status=1
  return 1
}

for c in "${checks[@]}"; do
  case $c in
    ops) check cuda_ops 300 "$b/bin/cuda_tests" ;;
    ops_mma) check cuda_ops_mma 300 "$b/bin/cuda_tests" --attention-kernels mma ;;
    layouts) need_gpus layouts 2 && check cuda_layouts 300 "${mp[@]}" -np 2 "$b/bin/cuda_layouts" ;;
    torch)
      mkdir -p "$dest/dump"
      check torch_dump 120 "$b/bin/dump_reference" "$dest/dump" cuda 50
      check torch_check 300 python3 "$root/tests/reference/check_vs_torch.py" "$dest/dump" ;;
    launch) check launch_checks 300 "$root/tests/cuda/launch_checks.sh" "$bin" "$b/bin/trident_test" "$root" "${mp[@]}" ;;
    train124m)
      need_gpus train124m 2 && check train124m_dp2 400 "${mp[@]}" -np 2 "$bin" train \
        --config "$root/inputs/models/gpt2-124m.cfg" "${data[@]}" --parallel.dp 2 --train.steps 60 \
        --train.micro_batch_size 16 --train.global_batch_size 32 --train.warmup_steps 10 --log.every 5 ;;
    generate)
      need_gpus generate 2 || continue
      check generate_train 300 "${mp[@]}" -np 2 "$bin" train --config "$root/inputs/models/gpt2-124m.cfg" \
        "${data[@]}" --parallel.dp 2 --train.steps 30 --train.micro_batch_size 8 --train.global_batch_size 16 \
        --train.warmup_steps 5 --log.every 10 --checkpoint.dir "$dest/gen_ck"
      tok=(--vocab "$root/data/gpt2/encoder.json" --merges "$root/data/gpt2/vocab.bpe" --max-new-tokens 40)
      check generate_greedy 120 "${mp[@]}" -np 2 "$bin" generate --checkpoint "$dest/gen_ck/step_30.h5" \
        --parallel.tp 2 --prompt "The meaning of life is" --temperature 0 "${tok[@]}"
      check generate_sampled 120 "${mp[@]}" -np 1 "$bin" generate --checkpoint "$dest/gen_ck/step_30.h5" \
        --prompt "Q: Why" --temperature 0.8 --top-k 40 "${tok[@]}" ;;
    tensorboard)
      check tensorboard_train 300 "${mp[@]}" -np 1 "$bin" train --config "$root/inputs/models/gpt2-124m.cfg" \
        "${data[@]}" --data.split 0.95 --train.steps 20 --train.micro_batch_size 8 --train.global_batch_size 8 \
        --train.eval_every 10 --train.eval_steps 2 --log.every 5 --log.metrics "$out/tensorboard.jsonl" \
        --log.tensorboard "$out/tensorboard"
      check tensorboard_read 120 python3 "$root/tests/cuda/tensorboard_accumulator.py" "$out/tensorboard" \
        "$out/tensorboard.jsonl" ;;
    nvtx)
      # Each range must select at least one kernel of its own: AdamW in optimizer, the embedding or a
      # LayerNorm in forward, NCCL's all-reduce kernel in "dp all-reduce".
      ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
      tiny=(train --config "$root/inputs/models/gpt2-124m.cfg" "${data[@]}" --model.n_layer 2 --train.steps 2
            --train.micro_batch_size 2)
      check nvtx_optimizer 300 "$ncu_bin" --nvtx --nvtx-include "optimizer/" --launch-count 1 --section LaunchStats \
        "$bin" "${tiny[@]}" --train.global_batch_size 2
      check nvtx_forward 300 "$ncu_bin" --nvtx --nvtx-include "forward/" --launch-count 3 --section LaunchStats \
        "$bin" "${tiny[@]}" --train.global_batch_size 2
      grep -qi adamw "$out/nvtx_optimizer.log" || { echo "nvtx: no AdamW kernel in range optimizer" | tee -a "$dest/summary.txt"; status=1; }
      grep -qi "encoder\|layernorm" "$out/nvtx_forward.log" ||
        { echo "nvtx: no embedding or LayerNorm kernel in range forward" | tee -a "$dest/summary.txt"; status=1; }
      if (( gpus >= 2 )); then
        check nvtx_dp 300 "${mp[@]}" -np 2 "$ncu_bin" --nvtx --nvtx-include "dp all-reduce/" --launch-count 1 \
          --section LaunchStats "$bin" "${tiny[@]}" --train.global_batch_size 4
        grep -q "ncclDevKernel_AllReduce" "$out/nvtx_dp.log" ||
          { echo "nvtx: no NCCL kernel in range dp all-reduce" | tee -a "$dest/summary.txt"; status=1; }
      fi ;;
    doctor)
      need_gpus doctor 2 && check doctor 120 "${mp[@]}" -np 2 "$bin" doctor \
        --config "$root/inputs/models/gpt2-124m.cfg" "${data[@]}" --parallel.tp 2 --checkpoint.dir "$dest/doctor_ck" ;;
    ckpt)
      need_gpus ckpt 2 || continue
      for m in gpt2-124m gpt2-350m; do
        for steps in 1 2; do   # the second run loads the first run's checkpoint, then saves its own
          check "ckpt_${m}_$steps" 300 "${mp[@]}" -np 2 "$bin" train --config "$root/inputs/models/$m.cfg" \
            "${data[@]}" --parallel.dp 2 --train.steps "$steps" --train.micro_batch_size 4 \
            --train.global_batch_size 8 --checkpoint.dir "$dest/ckpt_$m"
        done
      done ;;
    3d)
      need_gpus 3d 4 || continue
      m774=(--config "$root/inputs/models/gpt2-774m.cfg" "${data[@]}" --train.steps 20 --train.micro_batch_size 4
            --train.global_batch_size 16 --train.warmup_steps 5 --log.every 5)
      check 3d_doctor 120 "${mp[@]}" -np 4 "$bin" doctor --config "$root/inputs/models/gpt2-774m.cfg" "${data[@]}" \
        --parallel.tp 2 --parallel.pp 2 --checkpoint.dir "$dest/3d_doctor_ck"
      check 3d_tp2pp2 400 "${mp[@]}" -np 4 "$bin" train "${m774[@]}" --parallel.tp 2 --parallel.pp 2 \
        --checkpoint.dir "$dest/3d_ck" --checkpoint.every 10 --checkpoint.keep 2 --log.metrics "$out/3d_tp2pp2.jsonl"
      check 3d_dp2tp2 400 "${mp[@]}" -np 4 "$bin" train "${m774[@]}" --parallel.tp 2 --parallel.zero 1 \
        --log.metrics "$out/3d_dp2tp2.jsonl"
      check 3d_resume_dp4 400 "${mp[@]}" -np 4 "$bin" train "${m774[@]}" --parallel.zero 1 \
        --checkpoint.resume "$dest/3d_ck/step_10.h5" --log.metrics "$out/3d_resume_dp4.jsonl"
      check 3d_resume_tp4 400 "${mp[@]}" -np 4 "$bin" train "${m774[@]}" --parallel.tp 4 \
        --checkpoint.resume "$dest/3d_ck/step_10.h5" --log.metrics "$out/3d_resume_tp4.jsonl"
      python3 - "$out" <<'PY' | tee -a "$dest/summary.txt"
import json, sys
d = sys.argv[1]
def losses(name):
    return {r["step"]: r["loss"] for r in map(json.loads, open(f"{d}/{name}.jsonl"))}
ref = losses("3d_tp2pp2")
for other in ("3d_dp2tp2", "3d_resume_dp4", "3d_resume_tp4"):
    o = losses(other)
    worst = max(abs(o[s] - ref[s]) / ref[s] for s in o)
    print(f"{other}: steps {min(o) + 1}-{max(o) + 1} worst loss rel diff to tp2 x pp2: {worst:.2e}")
PY
      ;;
    vs_pytorch)
      one 124m_1gpu_a 1 "$bin" "${g124[@]}"
      pytorch pytorch124m_1gpu 1 --batch 32 --seq 1024 --steps 20
      one 124m_1gpu_b 1 "$bin" "${g124[@]}" ;;
    dp2)
      need_gpus dp2 2 || continue
      each_gpu 124m_1gpu "$bin" "${g124[@]}"
      for r in a b; do one "124m_dp2_$r" 2 "$bin" "${m124[@]}" "${z1[@]}"; done
      pytorch pytorch124m_ddp2 2 --batch 32 --seq 1024 --steps 20 ;;
    dp_scaling)
      echo "gpus,tokens_per_s,step_ms,scaling" >"$dest/dp_scaling.csv"
      base=""
      for n in 1 2 4 8; do
        (( n > gpus )) && break
        one "124m_dp$n" "$n" "$bin" "${m124[@]}" --train.global_batch_size $((32 * n)) --parallel.zero $((n > 1))
        read -r tok ms _ < <(row "$out/124m_dp$n.log")
        [[ -n $tok ]] || continue
        base=${base:-$tok}
        echo "$n,$tok,$ms,$(awk -v t="$tok" -v n="$n" -v b="$base" 'BEGIN {printf "%.4f", t / (n * b)}')" \
          >>"$dest/dp_scaling.csv"
      done
      pytorch "pytorch124m_ddp$gpus" "$gpus" --batch 32 --seq 1024 --steps 20
      cat "$dest/dp_scaling.csv" ;;
    tp2)
      need_gpus tp2 2 || continue
      one 1.5b_1gpu 1 "$bin" "${m15[@]}"
      one 1.5b_tp2 2 "$bin" "${m15[@]}" "${split[@]}" ;;
    pp2)
      need_gpus pp2 2 || continue
      one 1.5b_1gpu 1 "$bin" "${m15[@]}"
      one 1.5b_pp2 2 "$bin" "${m15[@]}" --parallel.pp 2 --parallel.schedule 1f1b ;;
    nodes2x2)
      # Two nodes of 2 GPUs emulated on one machine (emulate_nodes.sh: NCCL's network transport
      # between them): the 1.44B model at tp 2 inside a node and dp 2 or pp 2 across, each beside
      # the same layout on the machine as one node; the doctor's bus bandwidth of the communicators
      # that cross (the planner's --ib-gbps) and the planner's rows for 2 GPUs per node.
      need_gpus nodes2x2 4 || continue
      printf '#!/bin/sh\nexec %q 2 -- %q "$@"\n' "$here/emulate_nodes.sh" "$bin" >"$out/trident_2x2"
      chmod +x "$out/trident_2x2"
      for across in dp pp; do
        layout=(--parallel.tp 2)
        [[ $across == pp ]] && layout+=(--parallel.pp 2)
        one "1.5b_tp2_${across}2_one_node" 4 "$bin" "${m15[@]}" "${layout[@]}"
        one "1.5b_tp2_${across}2_2x2" 4 "$out/trident_2x2" "${m15[@]}" "${layout[@]}"
      done
      check doctor_2x2 300 "${mp[@]}" -np 4 "$out/trident_2x2" doctor --config "$root/inputs/models/gpt2-1.5b-tp.cfg" \
        "${data[@]}" --parallel.tp 2 --checkpoint.dir "$dest/doctor_2x2_ck"
      check plan_2x2 60 "$bin" plan "${m15[@]}" --gpus 4 --gpus-per-node 2 --top 40 ;;
    transformers)
      # Hugging Face transformers (installed on the GPU nodes, not in CI) loads what trident exports
      # and trident converts what save_pretrained writes; python runs on its own libraries, the
      # bundle's binaries through its launcher.
      printf '#!/bin/sh\nTRIDENT_BUNDLE_BIN=hf_logits exec %q/trident "$@"\n' "$b" >"$out/hf_logits.sh"
      chmod +x "$out/hf_logits.sh"
      check transformers 300 env -u LD_LIBRARY_PATH python3 "$root/tests/cuda/check_transformers.py" "$b/trident" \
        "$out/hf_logits.sh" "$root" ;;
    convert8b)
      # The full Llama-3-8B shape (16 GB of bf16 safetensors in, a 32 GB fp32 checkpoint): --from-hf
      # on 1 and 4 ranks, --to-hf bf16 on 4 and 1; scratch in CONVERT_DIR, removed as it goes.
      w=${CONVERT_DIR:-/tmp/trident_convert8b}
      rm -rf "$w" && mkdir -p "$w"
      check hf8b_write 600 env -u LD_LIBRARY_PATH python3 "$here/hf_random_model.py" "$w/hf"
      for n in 1 4; do
        check "from_hf_8b_np$n" 600 "${mp[@]}" -np $n "$bin" convert --from-hf "$w/hf" --out "$w/ck$n.h5"
        (( n == 1 )) && rm -f "$w/ck1.h5"
      done
      rm -rf "$w/hf"
      for n in 4 1; do
        check "to_hf_8b_np$n" 600 "${mp[@]}" -np $n "$bin" convert --to-hf "$w/ck4.h5" --out "$w/out$n" --dtype bf16
        rm -rf "$w/out$n"
      done
      rm -rf "$w" ;;
    llama_peers)
      # The 8B shape's 32 layers need 4 GPUs; on 2, 16 layers take 39 GiB a GPU at B1 without
      # activation checkpointing, room to spare on 80 GB cards.
      peers=(pytorch_llama1b_1gpu)
      pytorch "${peers[0]}" 1 --preset llama3.2-1b --batch 4 --steps 20
      if (( gpus >= 2 )); then
        n=$((gpus >= 4 ? 4 : 2))
        layers=${LLAMA8B_LAYERS:-$((n == 4 ? 32 : 16))}
        peers+=("pytorch_llama8b_fsdp${n}_l$layers")
        pytorch "${peers[1]}" "$n" --preset llama3-8b --fsdp --layers "$layers" --batch 1 \
          --ac "${LLAMA8B_AC:-none}" --steps 10
      fi
      for p in "${peers[@]}"; do grep '^llama ' "$out/$p.log" | sed "s/^llama  */$p: /" | tee -a "$dest/summary.txt"; done ;;
    attention)
      check kernels 300 "$bin" bench --bench.kernels
      pytorch sdpa 1 --attention
      grep -hE '^(attention|sdpa)' "$out/kernels.log" "$out/sdpa.log" | tee -a "$dest/summary.txt" ;;
    kernels) check kernels 300 "$bin" bench --bench.kernels ;;
    kernels_mma) check kernels_mma 300 "$bin" bench --bench.kernels --cuda.attention_kernels mma ;;
    profile)
      one 124m_profile 1 "$bin" "${g124[@]}" --bench.profile --bench.profile_steps 10
      sed -n '/GPU time per step by op/,$p' "$out/124m_profile.log" >>"$dest/summary.txt" ;;
    trace) traced 124m_trace 1 "$bin" "${g124[@]}" ;;
    ncu)
      ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
      sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats
                --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis)
      # The first attention launches are HS 64, T 1024: forward, backward preprocessing, dK/dV, dQ.
      check ncu_attention 300 "$ncu_bin" --clock-control none -k regex:attention --launch-count 4 "${sections[@]}" \
        "$bin" bench --bench.kernels
      check ncu_memory 300 "$ncu_bin" --clock-control none -k "regex:layernorm_bwd_fused|xent_fused" --launch-count 2 \
        "${sections[@]}" "$bin" bench --bench.kernels ;;
    *) echo "run.sh checks: unknown check '$c' (the list is at the top of tools/perf/run.sh)" | tee -a "$dest/summary.txt"
       status=1 ;;
  esac
done
finish
exit $status
