#!/usr/bin/env bash
# e2e: online RL with --task ppo. A 2-layer llama-tiny is fine-tuned (sft) on single-digit addition
# and subtraction; PPO then samples 4 answers to each of 16 questions per step, rewards an answer
# that is a single digit 0-4 (rl.format_pattern; plus 1 for the exact answer) minus the k1 KL to
# the sft weights per token, and trains the policy and a value model started from the sft
# transformer. Checked:
# - the mean reward of steps 9-12 is above that of steps 1-4 by 0.2, on one rank and on tp 2 (the
#   value head under tensor parallelism); step 1 is the same on both; the value loss falls;
# - on pp 2 (the policy, value model and reference each split in two stages) steps 1-3 are those
#   of one rank: the same answers and rewards, step 1's losses bit for bit; the gradient norm, summed
#   over the stages in another order, and after it the later steps' losses within 1e-5; under
#   parallel.schedule = zero_bubble (policy and value model) those of 1f1b bit for bit;
# - a run resumed from its step-6 checkpoint repeats steps 7-12 exactly (policy, value model and
#   both optimizer states, the adaptive KL coefficient), which inspect lists; resumed on dp 2 it
#   gives step 7 the same reward and KL coefficient, and values within 1e-4;
# - rl.value_from a reward model's checkpoint loads its score head as the value head;
# - bad options and a grpo checkpoint resumed as ppo exit 2 with one line.
#   ppo.sh TRIDENT REPO_ROOT [MPIRUN ARGS... -np 2]
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
arith_sft 60
model=("${arith_model[@]}")

rl=("${model[@]}" --init.from "$out/sft/step_60.h5" --rl.tokenizer byte --rl.group 4 --rl.max_new_tokens 4
    --rl.prompts "$out/prompts.jsonl" --rl.format_pattern "[0-4]" --rl.format_reward 1 --model.seq_len 48
    --train.micro_batch_size 32 --train.global_batch_size 64 --train.lr 1e-3 --train.min_lr 1e-3
    --train.warmup_steps 0 --log.every 4)
ppo=("${rl[@]}" --task ppo --rl.kl_target 0.5 --rl.kl_horizon 2000 --train.steps 12)
start=$SECONDS
"$trident" train "${ppo[@]}" --log.metrics "$out/one.jsonl" --checkpoint.dir "$out/ckpt" --checkpoint.every 6 \
  > "$out/one.log" || { cat "$out/one.log"; exit 1; }
grep -E "^(step |init)" "$out/one.log"
echo "ppo on one rank took $((SECONDS - start)) s"
"$@" "$trident" train "${ppo[@]}" --parallel.tp 2 --log.metrics "$out/tp2.jsonl" > "$out/tp2.log" ||
  { cat "$out/tp2.log"; exit 1; }
grep -q "layout dp=1 tp=2" "$out/tp2.log" || { echo "the second run is not tp 2"; exit 1; }
"$@" "$trident" train "${rl[@]}" --task ppo --rl.kl_target 0.5 --rl.kl_horizon 2000 --train.steps 3 --parallel.pp 2 \
  --log.metrics "$out/pp2.jsonl" > "$out/pp2.log" || { cat "$out/pp2.log"; exit 1; }
grep -q "layout dp=1 tp=1 pp=2" "$out/pp2.log" || { echo "the pipeline run is not pp 2"; exit 1; }
/usr/bin/python3 - "$out/one.jsonl" "$out/pp2.jsonl" <<'PY'
import json, sys
one, pp2 = ([json.loads(l) for l in open(f)] for f in sys.argv[1:])
assert len(pp2) == 3, len(pp2)
exact = ("reward", "reward_std", "answer_tokens", "clip_fraction", "value_clip_fraction")
close = ("loss", "kl", "entropy", "value_loss", "explained_variance", "kl_coef", "grad_norm")
for a, b in zip(one, pp2):
    near = lambda k: abs(a[k] - b[k]) <= 1e-5 * max(abs(a[k]), 1e-2)
    assert all(a[k] == b[k] for k in exact) and all(near(k) for k in close), \
        f"step {b['step']} on pp 2 differs from one rank's: {a} {b}"
assert all(one[0][k] == pp2[0][k] for k in close if k != "grad_norm"), (one[0], pp2[0])
print("steps 1-3 on pp 2: one rank's answers and rewards, step 1 bit for bit, the rest within 1e-5")
PY
"$@" "$trident" train "${rl[@]}" --task ppo --rl.kl_target 0.5 --rl.kl_horizon 2000 --train.steps 3 --parallel.pp 2 \
  --parallel.schedule zero_bubble --log.metrics "$out/pp2_zb.jsonl" > "$out/pp2_zb.log" || { cat "$out/pp2_zb.log"; exit 1; }
/usr/bin/python3 - "$out/pp2.jsonl" "$out/pp2_zb.jsonl" <<'PY'
import json, sys
pp2, zb = ([json.loads(l) for l in open(f)] for f in sys.argv[1:])
keys = ("reward", "reward_std", "answer_tokens", "clip_fraction", "value_clip_fraction", "loss", "kl", "entropy",
        "value_loss", "explained_variance", "kl_coef", "grad_norm")
assert len(zb) == 3 and all(a[k] == b[k] for a, b in zip(pp2, zb) for k in keys), (pp2, zb)
print("steps 1-3 on pp 2 under zero_bubble: 1f1b's bit for bit")
PY
"$trident" inspect "$out/ckpt/step_6.h5" > "$out/inspect.log"
grep -q "task ppo: KL coefficient" "$out/inspect.log" && grep -q "^  /value/model/score.weight  *1 x 64 " "$out/inspect.log" &&
  grep -q "^  /value/optim/exp_avg_sq: " "$out/inspect.log" || { echo "inspect shows no value model"; cat "$out/inspect.log"; exit 1; }

# Resumed from step 6 of the first run: a directory holding only that checkpoint.
mkdir "$out/resume"
cp "$out/ckpt/step_6.h5" "$out/resume/"
"$trident" train "${ppo[@]}" --log.metrics "$out/resumed.jsonl" --checkpoint.dir "$out/resume" \
  > "$out/resumed.log" || { cat "$out/resumed.log"; exit 1; }
grep -q "resumed from .*step_6.h5 at step 6" "$out/resumed.log" || { cat "$out/resumed.log"; exit 1; }

# The same checkpoint resumed on the launcher's ranks as dp 2 (another layout: each rank its half of
# the prompts, the value model's gradients averaged over DP) for steps 7 and 8.
mkdir "$out/resume_dp2"
cp "$out/ckpt/step_6.h5" "$out/resume_dp2/"
"$@" "$trident" train "${rl[@]}" --task ppo --rl.kl_target 0.5 --rl.kl_horizon 2000 --train.steps 8 \
  --log.metrics "$out/dp2.jsonl" --checkpoint.dir "$out/resume_dp2" > "$out/dp2.log" || { cat "$out/dp2.log"; exit 1; }
grep -q "layout dp=2 tp=1" "$out/dp2.log" && grep -q "resumed from .*step_6.h5 at step 6" "$out/dp2.log" ||
  { echo "not a dp 2 run resumed at step 6"; cat "$out/dp2.log"; exit 1; }
/usr/bin/python3 - "$out/one.jsonl" "$out/dp2.jsonl" <<'PY'
import json, sys
one, dp2 = ([json.loads(l) for l in open(f)] for f in sys.argv[1:])
a, b = one[6], dp2[0]
assert len(dp2) == 2 and b["step"] == 7, dp2
print(f"step 7 resumed on dp 2: reward {b['reward']:.4f} (one rank {a['reward']:.4f}), value loss {b['value_loss']:.6f} "
      f"({a['value_loss']:.6f}), kl coef {b['kl_coef']:.6f} ({a['kl_coef']:.6f})")
assert a["reward"] == b["reward"] and a["kl_coef"] == b["kl_coef"], (a, b)
for key in ("value_mean", "value_loss", "kl"):
    assert abs(a[key] - b[key]) < 1e-4, f"step 7 {key}: {a[key]} on one rank, {b[key]} on dp 2"
PY

/usr/bin/python3 - "$out/one.jsonl" "$out/tp2.jsonl" "$out/resumed.jsonl" <<'PY'
import json, sys
one, tp2, resumed = ([json.loads(l) for l in open(f)] for f in sys.argv[1:])
assert len(one) == len(tp2) == 12 and len(resumed) == 6, (len(one), len(tp2), len(resumed))
for name, rows in (("one rank", one), ("tp 2", tp2)):
    r = [row["reward"] for row in rows]
    v = [row["value_loss"] for row in rows]
    first, last = sum(r[:4]) / 4, sum(r[-4:]) / 4
    print(f"{name}: mean reward of steps 1-4 {first:.3f}, of steps 9-12 {last:.3f}; value loss {v[0]:.3f} -> "
          f"{sum(v[-4:]) / 4:.3f}; kl coef {rows[0]['kl_coef']:.4f} -> {rows[-1]['kl_coef']:.4f}")
    # Measured: 0.43 -> 0.79 on one rank.
    assert last > first + 0.2, f"{name}: PPO did not raise the reward ({first:.3f} -> {last:.3f})"
    assert sum(v[-4:]) / 4 < v[0], f"{name}: the value loss did not fall ({v})"
    for key in ("kl", "clip_fraction", "value_clip_fraction", "value_mean", "explained_variance", "kl_coef"):
        assert all(row.get(key) is not None for row in rows), f"{name}: metric {key} missing"
    # Adaptive KL control from rl.kl_beta: each step's coefficient is the previous one times
    # 1 + clip(KL per answer / 0.5 - 1, +-0.2) * 64 answers / 2000 (TRL's AdaptiveKLController).
    assert rows[0]["kl_coef"] == 0.04, rows[0]["kl_coef"]
    for a, b in zip(rows, rows[1:]):
        error = min(max(a["kl"] * a["answer_tokens"] / 0.5 - 1, -0.2), 0.2)
        want = a["kl_coef"] * (1 + error * 64 / 2000)
        assert abs(b["kl_coef"] - want) < 1e-9 * want, f"{name}: step {b['step']} kl_coef {b['kl_coef']}, not {want}"
    assert rows[-1]["kl_coef"] != 0.04, f"{name}: the KL coefficient did not adapt"
assert one[0]["reward"] == tp2[0]["reward"] and abs(one[0]["value_loss"] - tp2[0]["value_loss"]) < 1e-5, \
    f"step 1 differs: {one[0]} on one rank, {tp2[0]} on tp 2"
keys = ("loss", "reward", "kl", "clip_fraction", "grad_norm", "value_loss", "value_clip_fraction", "value_mean",
        "explained_variance", "kl_coef")
for a, b in zip(one[6:], resumed):
    assert a["step"] == b["step"] and all(a[k] == b[k] for k in keys), f"resumed step {b['step']} differs: {a} {b}"
print("step 1 the same on both layouts; steps 7-12 of the resumed run identical to the uninterrupted run")
PY

# The value model from a reward model (task reward, started from the same sft weights): its score
# head loads too (no fresh head), so its first values differ from the fresh head's.
/usr/bin/python3 "$root/tools/make_arithmetic_chat.py" --max-operand 9 --format preference --records 200 --seed 3 \
  > "$out/pref.jsonl"
"$trident" tokenize --input "$out/pref.jsonl" --output "$out/pref" --tokenizer byte --format preference \
  --chat-template plain > "$out/tokenize_pref.log"
"$trident" train "${model[@]}" --task reward --init.from "$out/sft/step_60.h5" --data.train "$out/pref" \
  --model.seq_len 48 --train.steps 4 --train.micro_batch_size 8 --train.global_batch_size 16 --checkpoint.dir "$out/rm" \
  > "$out/rm.log" || { cat "$out/rm.log"; exit 1; }
"$trident" train "${rl[@]}" --task ppo --train.steps 1 --rl.value_from "$out/rm/step_4.h5" \
  --log.metrics "$out/from_rm.jsonl" > "$out/from_rm.log" || { cat "$out/from_rm.log"; exit 1; }
grep -q "init: weights from $out/rm/step_4.h5 in [0-9.e-]* s$" "$out/from_rm.log" ||
  { echo "the value model did not start from the reward model"; cat "$out/from_rm.log"; exit 1; }
/usr/bin/python3 - "$out/one.jsonl" "$out/from_rm.jsonl" <<'PY'
import json, sys
fresh, from_rm = (json.loads(open(f).readline()) for f in sys.argv[1:])
print(f"step 1 mean value: fresh head {fresh['value_mean']:.4f}, reward model's head {from_rm['value_mean']:.4f}")
assert fresh["reward"] == from_rm["reward"] and fresh["value_mean"] != from_rm["value_mean"], (fresh, from_rm)
PY

bad() {   # expected message fragment, then the options
  local expected=$1
  shift
  set +e
  "$trident" train "${ppo[@]}" "$@" > "$out/bad.log" 2>&1
  local rc=$?
  set -e
  [[ $rc == 2 && $(grep -c "error" "$out/bad.log") == 1 ]] && grep -q -- "$expected" "$out/bad.log" ||
    { echo "bad options ($expected): exit $rc"; cat "$out/bad.log"; exit 1; }
}
bad "rl.kl_target = 0.5: adapts rl.kl_beta, which is 0" --rl.kl_beta 0
bad "rl.value_clip = 0: must be > 0" --rl.value_clip 0
bad "rl.gamma = 1.5: must be in (0, 1\]" --rl.gamma 1.5
bad "rl.lambda = -0.1: must be in \[0, 1\]" --rl.lambda -0.1
bad "rl.value_from: checkpoint $out/nothing.h5: no such file" --rl.value_from "$out/nothing.h5"
# A grpo run's checkpoint has no value model: resuming it as ppo is refused, and the directory kept.
"$trident" train "${rl[@]}" --task grpo --train.steps 1 --checkpoint.dir "$out/grpo" > "$out/grpo.log" ||
  { cat "$out/grpo.log"; exit 1; }
bad "holds no value model (/value)" --checkpoint.dir "$out/grpo"
[[ -f $out/grpo/step_1.h5 ]] || { echo "the refused resume removed the grpo checkpoint"; exit 1; }
echo "ppo: ok"
