#!/usr/bin/env bash
# kill -9 loop: a 2-rank run saving after every step has its ranks killed with SIGKILL while a
# save is under way, then is started again with checkpoint.resume = auto, several times over.
# Every restart after the first save must resume from a checkpoint (never from step 0), and every
# step logged by any of the runs must have the same loss, bit for bit, as an uninterrupted run.
# Where a kill lands varies from run to run; the checks hold wherever it lands.
#   checkpoint_kill_loop.sh TRIDENT REPO_ROOT MPIRUN ARGS...
set -uo pipefail
trident=$(realpath "$1") root=$(realpath "$2")
shift 2
mpirun=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
steps=12
train() {
  "${mpirun[@]}" -np 2 "$trident" train --config "$root/inputs/models/tiny.cfg" --backend cpu \
    --data.train "$root/data/fortunes_byte" --model.seq_len 32 --model.n_layer 2 --parallel.pp 2 \
    --train.micro_batch_size 2 --train.global_batch_size 4 --train.steps $steps --log.every 1 "$@"
}
losses() { /usr/bin/python3 -c 'import json,sys; [print(json.loads(l)["step"], repr(json.loads(l)["loss"])) for l in open(sys.argv[1])]' "$1"; }
fail() { echo "FAIL: $*"; exit 1; }

train --log.metrics "$work/full.jsonl" >"$work/full.log" 2>&1 || { cat "$work/full.log"; fail "uninterrupted run"; }
ck=$work/ck
killed_in_save=0
for run in 1 2 3 4 5 6; do
  had_checkpoint=$(compgen -G "$ck/step_*.h5" >/dev/null && echo 1 || echo 0)
  train --checkpoint.dir "$ck" --checkpoint.every 1 --log.metrics "$work/run$run.jsonl" >"$work/run$run.log" 2>&1 &
  launcher=$!
  # Once this run has logged a step or two (each followed by a save), kill its ranks as soon as a
  # checkpoint is being written.
  lines=$((run % 2 + 1))
  for _ in $(seq 1 3000); do
    kill -0 "$launcher" 2>/dev/null || break
    [[ -f $work/run$run.jsonl ]] && (( $(wc -l <"$work/run$run.jsonl") >= lines )) &&
      compgen -G "$ck/step_*.h5.tmp" >/dev/null && break
    sleep 0.005
  done
  # SIGKILL to mpirun alone leaves its ranks running (saving) for a while into the next run: kill
  # every process of this run (each has the checkpoint directory on its command line) and wait
  # until all are gone.
  pkill -KILL -f -- "--checkpoint.dir $ck "
  wait "$launcher"
  for _ in $(seq 1 500); do pgrep -f -- "--checkpoint.dir $ck " >/dev/null || break; sleep 0.01; done
  compgen -G "$ck/step_*.h5.tmp" >/dev/null && killed_in_save=$((killed_in_save + 1))
  if (( had_checkpoint )); then
    grep -q "resumed from $ck/step_" "$work/run$run.log" || { cat "$work/run$run.log"; fail "run $run did not resume"; }
  fi
  if [[ -e $ck/latest ]]; then
    [[ -f $ck/$(cat "$ck/latest") ]] || fail "after run $run, latest names $(cat "$ck/latest"), which does not exist"
  fi
done
train --checkpoint.dir "$ck" --checkpoint.every 1 --log.metrics "$work/last.jsonl" >"$work/last.log" 2>&1 ||
  { cat "$work/last.log"; fail "the run after the kills"; }
grep -q "resumed from $ck/step_" "$work/last.log" || { cat "$work/last.log"; fail "the last run did not resume"; }
[[ $(cat "$ck/latest") == step_$steps.h5 ]] || fail "latest is not step_$steps.h5 at the end"
losses "$work/full.jsonl" | sort -u >"$work/want"
cat "$work"/run*.jsonl "$work/last.jsonl" >"$work/all.jsonl"
losses "$work/all.jsonl" | sort -u >"$work/got"
# Every step logged by some run, with its reference loss; and every step logged.
comm -13 "$work/want" "$work/got" | grep . && fail "the steps above have other losses than the uninterrupted run"
[[ $(cut -d' ' -f1 "$work/got" | sort -u | wc -l) -eq $steps ]] || fail "not every step was run"
echo "ok: 6 runs killed with SIGKILL ($killed_in_save of them during a save) resumed each time; every logged loss" \
  "matches the uninterrupted run"
