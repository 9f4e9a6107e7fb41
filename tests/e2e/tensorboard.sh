#!/usr/bin/env bash
# e2e: log.tensorboard writes an event file that an independent reader (read_tfevents.py: framing,
# both CRCs, protocol buffers by hand) reads back with every metric of log.metrics at its step.
#   tensorboard.sh TRIDENT REPO_ROOT [MPIRUN ARGS...]
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
"$@" "$trident" train --config "$root/inputs/models/tiny.cfg" --backend cpu --data.train "$data" --data.split 0.9 \
  --model.n_layer 1 --model.seq_len 16 --train.micro_batch_size 2 --train.global_batch_size 4 --train.steps 8 \
  --train.eval_every 4 --train.eval_steps 1 --log.metrics "$out/m.jsonl" --log.tensorboard "$out/tb" >"$out/log" 2>&1 ||
  { cat "$out/log"; exit 1; }
files=("$out"/tb/events.out.tfevents.*)
[[ ${#files[@]} == 1 && -s ${files[0]} ]] || { echo "FAIL: expected one event file, got: ${files[*]}"; exit 1; }
/usr/bin/python3 "$root/tests/e2e/read_tfevents.py" "${files[0]}" "$out/m.jsonl"
