#!/usr/bin/env bash
# e2e: the tiny model trains on the byte-level fortunes corpus and its loss falls clearly.
#   train_tiny.sh TRIDENT REPO_ROOT [MPIRUN ARGS...]
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
"$@" "$trident" train --config "$root/inputs/models/tiny.cfg" --backend cpu --data.train "$data" \
  --model.seq_len 64 --train.micro_batch_size 4 --train.global_batch_size 8 --train.steps 200 \
  --log.every 50 --log.metrics "$out/m.jsonl"
/usr/bin/python3 - "$out/m.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 200, f"expected 200 metrics rows, got {len(rows)}"
first = sum(r["loss"] for r in rows[:5]) / 5
last = sum(r["loss"] for r in rows[-10:]) / 10
print(f"mean loss of steps 1-5: {first:.3f}, of steps 191-200: {last:.3f}")
# Uniform over 257 bytes is ln(257) = 5.55; byte-level English falls well under 3 quickly.
assert first > 5.0, f"initial loss {first:.3f} should be near ln(257) = 5.55"
assert last < 3.0, f"loss after 200 steps {last:.3f} is not below 3.0"
for key in ("step", "loss", "lr", "grad_norm", "tokens_per_s", "step_ms"):
    assert key in rows[0], f"metrics row lacks {key}"
PY
