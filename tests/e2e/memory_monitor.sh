#!/usr/bin/env bash
# e2e: the memory monitor samples every rank's memory at the printed steps (log.every) into the
# metrics rows (null elsewhere), and a rank above log.memory_warning warns once per crossing.
#   memory_monitor.sh TRIDENT REPO_ROOT MPIRUN [MPIRUN ARGS...]
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
"$@" -np 2 "$trident" train --config "$root/inputs/models/tiny.cfg" --backend cpu --data.train "$data" \
  --model.n_layer 1 --model.seq_len 16 --train.micro_batch_size 2 --train.global_batch_size 4 --train.steps 6 \
  --log.every 3 --log.memory_warning 1e-9 --log.metrics "$out/m.jsonl" >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
warnings=$(grep -c "warning: memory at step 1: .* GiB in use (over log.memory_warning = 1e-09)" "$out/log" || true)
[[ $warnings == 2 ]] || { cat "$out/log"; echo "FAIL: expected one warning from each of 2 ranks, got $warnings"; exit 1; }
/usr/bin/python3 - "$out/m.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sampled = [r["step"] for r in rows if r["mem_used_gib"] is not None]
assert sampled == [1, 3, 6], f"memory sampled at steps {sampled}, expected the printed steps 1, 3, 6"
for r in rows:
    if r["mem_used_gib"] is not None:
        assert len(r["mem_used_gib"]) == len(r["mem_total_gib"]) == 2, r
        assert all(0 < u < t for u, t in zip(r["mem_used_gib"], r["mem_total_gib"])), r
    else:
        assert r["mem_total_gib"] is None, r
print("ok: memory of both ranks at steps 1, 3, 6; one warning per rank")
PY
