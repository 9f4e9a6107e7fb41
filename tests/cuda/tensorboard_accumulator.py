#!/usr/bin/python3
"""TensorBoard's own reader (EventAccumulator, from the tensorboard package) against a run's
log.tensorboard directory: every scalar of the metrics rows must be there at its step.

    tensorboard_accumulator.py TENSORBOARD_DIR METRICS_JSONL"""
import json
import math
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

TAGS = {"loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm", "val_loss": "val/loss",
        "tokens_per_s": "perf/tokens_per_s", "step_ms": "perf/step_ms", "mfu": "perf/mfu",
        "peak_mem_gib": "perf/peak_mem_gib", "comm_wait": "perf/comm_wait"}

acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
acc.Reload()
have = set(acc.Tags()["scalars"])
rows = [json.loads(line) for line in open(sys.argv[2])]
checked = 0
for key, tag in TAGS.items():
    measured = {r["step"]: r[key] for r in rows if r.get(key) is not None}
    if not measured:
        continue
    assert tag in have, f"EventAccumulator finds no {tag} (tags: {sorted(have)})"
    got = {e.step: e.value for e in acc.Scalars(tag)}
    for step, value in measured.items():
        assert step in got and math.isclose(got[step], value, rel_tol=1e-6, abs_tol=1e-30), \
            f"{tag} step {step}: {got.get(step)} != {value}"
        checked += 1
print(f"ok: EventAccumulator read {len(have)} tags; {checked} values equal the metrics rows")
