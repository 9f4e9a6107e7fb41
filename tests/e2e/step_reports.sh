#!/usr/bin/env bash
# e2e: every step is numbered by the updates done (console, metrics and checkpoint names agree),
# timed by itself (no step next to an evaluation or a checkpoint reports a near-zero time), and
# reported with every progress field in both the console line and the metrics row; the run ends
# with a performance summary, printed and in log.summary.
#   step_reports.sh TRIDENT REPO_ROOT [MPIRUN ARGS...]
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
"$@" "$trident" train --config "$root/inputs/models/tiny.cfg" --backend cpu --data.train "$data" \
  --data.split 0.9 --model.seq_len 32 --train.micro_batch_size 2 --train.global_batch_size 4 --train.steps 20 \
  --train.eval_every 5 --train.eval_steps 1 --checkpoint.dir "$out/ckpt" --checkpoint.every 7 --checkpoint.keep 5 \
  --log.every 1 --log.metrics "$out/m.jsonl" --log.summary "$out/summary.json" >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
/usr/bin/python3 - "$out" <<'PY'
import json, os, re, statistics, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/m.jsonl")]
log = open(f"{out}/log").read()
steps = [r["step"] for r in rows]
assert steps == list(range(1, 21)), f"metrics steps should be 1..20, got {steps}"
console = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^step +(\d+)/20 \| loss ([0-9.]+)", log, re.M)}
assert sorted(console) == steps, f"console steps {sorted(console)} differ from the metrics' {steps}"
for r in rows:
    assert abs(console[r["step"]] - r["loss"]) < 1e-3, f"step {r['step']}: console loss {console[r['step']]} != {r['loss']}"
evals = [int(m.group(1)) for m in re.finditer(r"^eval +(\d+) \|", log, re.M)]
with_val = [r["step"] for r in rows if "val_loss" in r]
assert evals == with_val == [5, 10, 15, 20], f"evaluations: console {evals}, metrics {with_val}"
saved = sorted(int(m.group(1)) for m in re.finditer(r"step_(\d+)\.h5", " ".join(os.listdir(f"{out}/ckpt"))))
assert saved == [7, 14, 20], f"checkpoints {saved}, expected step_7, step_14, step_20 (after updates 7, 14, 20)"
keys = ("step", "loss", "lr", "grad_norm", "tokens_per_s", "step_ms", "mfu", "peak_mem_gib", "comm_wait",
        "elapsed_s", "eta_s", "mem_used_gib", "mem_total_gib", "skipped", "skipped_steps")
for r in rows:
    missing = [k for k in keys + (("val_loss", "val_ppl") if r["step"] % 5 == 0 else ()) if k not in r]
    assert not missing, f"metrics row of step {r['step']} lacks {missing}"
    assert r["peak_mem_gib"] > 0 and r["elapsed_s"] > 0 and r["eta_s"] >= 0, f"step {r['step']}: {r}"
    assert r["mfu"] is None and r["comm_wait"] is None, "the CPU backend measures no MFU or comm wait: null"
    assert "device_peak_gib" not in r, "a CPU rank has no GPU-reported peak: the key is absent"
for r in rows:
    used, total = r["mem_used_gib"], r["mem_total_gib"]
    assert len(used) == len(total) == 1 and 0 < used[0] < total[0], f"step {r['step']}: memory {used} of {total}"
assert rows[-1]["eta_s"] == 0, f"ETA at the last step: {rows[-1]['eta_s']}"
fields = r"^step +\d+/20 \| loss \S+ \| lr \S+ \| grad norm \S+ \| \d+ tok/s \| MFU - \| mem [0-9.]+ GiB \| " \
         r"comm wait - \| [0-9.]+ ms \| elapsed \w+ \| ETA \w+$"
lines = re.findall(r"^step +\d+/20 .*$", log, re.M)
bad = [l for l in lines if not re.match(fields, l)]
assert not bad, f"console lines without every field (step, loss, lr, grad norm, tok/s, MFU, mem, comm wait, ms, " \
                f"elapsed, ETA): {bad[:2]}"
ms = [r["step_ms"] for r in rows]
median = statistics.median(ms)
short = [(r["step"], round(r["step_ms"], 3)) for r in rows if r["step_ms"] < 0.1 * median]
assert not short, f"steps reported under 10% of the median step {median:.3f} ms: {short}"
summary = json.load(open(f"{out}/summary.json"))
for key in ("steps", "wall_s", "tokens", "tokens_per_s_mean", "tokens_per_s_median", "mfu", "time_s",
            "peak_mem_gib_per_rank", "checkpoint_save_gb_per_s", "checkpoint_load_gb_per_s", "checkpoints_saved"):
    assert key in summary, f"summary lacks {key}"
for key in ("steps", "compute", "exposed_comm", "pipeline_bubble_estimate", "data_loading", "checkpoints",
            "evaluation", "other"):
    assert key in summary["time_s"], f"summary time split lacks {key}"
assert "device_peak_gib_per_rank" not in summary, "a CPU run's summary has no GPU-reported peak"
assert summary["steps"] == 20 and summary["tokens"] == 20 * 4 * 32, summary
assert abs(summary["time_s"]["steps"] - sum(ms) / 1e3) < 1e-6 * summary["wall_s"] + 1e-9
assert summary["time_s"]["evaluation"] > 0 and summary["time_s"]["checkpoints"] > 0, summary["time_s"]
assert summary["time_s"]["data_loading"] > 0 and summary["time_s"]["pipeline_bubble_estimate"] == 0
assert summary["checkpoints_saved"] == 3 and summary["checkpoint_save_gb_per_s"] > 0, summary
assert summary["checkpoint_load_gb_per_s"] is None, "nothing was loaded"
m = summary["peak_mem_gib_per_rank"]
assert 0 < m["min"] <= m["median"] <= m["max"], m
for line in ("performance summary: 20 steps", "tokens/s mean", "time: steps", "peak memory per rank: min",
             "checkpoints: save"):
    assert line in log, f"no '{line}' in the printed summary"
print(f"ok: steps 1..20 agree in console, metrics and checkpoints; step times {min(ms):.2f}..{max(ms):.2f} ms, "
      f"median {median:.2f}")
PY
