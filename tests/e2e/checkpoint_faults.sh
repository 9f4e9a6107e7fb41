#!/usr/bin/env bash
# Checkpoint safety on CPU ranks:
#  1. a rank killed (like kill -9) in the middle of a save leaves the previous checkpoint
#     loadable, and training resumed from it finishes with the same losses as an uninterrupted run;
#  2. SIGTERM during training: the step finishes, a checkpoint is written, exit 0, and resuming
#     continues exactly (same losses, bit for bit, as the uninterrupted run);
#  and a resume with data settings other than the checkpoint's notes which differ.
#   checkpoint_faults.sh TRIDENT REPO_ROOT MPIRUN ARGS...
set -uo pipefail
trident=$(realpath "$1") root=$(realpath "$2")   # absolute: one run starts in the repo root
shift 2
mpirun=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmd=("${mpirun[@]}" -np 2 -x TRIDENT_TEST_DIE_IN_SAVE "$trident" train --config "$root/inputs/models/tiny.cfg"
     --backend cpu --model.seq_len 32 --model.n_layer 2
     --train.micro_batch_size 2 --train.global_batch_size 4 --parallel.pp 2 --log.every 1)
train() { "${cmd[@]}" --data.train "$root/data/fortunes_byte" "$@"; }
losses() { /usr/bin/python3 -c 'import json,sys; [print(json.loads(l)["step"], repr(json.loads(l)["loss"])) for l in open(sys.argv[1])]' "$1"; }
fail() { echo "FAIL: $*"; exit 1; }

export TRIDENT_TEST_DIE_IN_SAVE=""
train --train.steps 8 --log.metrics "$work/full.jsonl" >"$work/full.log" 2>&1 || { cat "$work/full.log"; fail "uninterrupted run"; }

# 1. rank 1 dies while writing the step-4 checkpoint.
TRIDENT_TEST_DIE_IN_SAVE=1:4 train --train.steps 8 --checkpoint.dir "$work/ck" --checkpoint.every 2 \
  --log.metrics "$work/a.jsonl" >"$work/a.log" 2>&1 && fail "the run with a rank killed in a save exited 0"
[[ $(cat "$work/ck/latest") == step_2.h5 ]] || fail "latest is '$(cat "$work/ck/latest")', expected step_2.h5"
[[ -f $work/ck/step_4.h5 ]] && fail "an interrupted save left step_4.h5 under its final name"
train --train.steps 8 --checkpoint.dir "$work/ck" --checkpoint.every 2 --log.metrics "$work/b.jsonl" \
  >"$work/b.log" 2>&1 || { cat "$work/b.log"; fail "resume after the killed save"; }
grep -q "resumed from $work/ck/step_2.h5 at step 2" "$work/b.log" || fail "did not resume from step_2.h5"
diff <(losses "$work/full.jsonl" | tail -n 6) <(losses "$work/b.jsonl") || fail "losses after resume differ"
echo "ok: killed save left step_2.h5 loadable; resumed steps 3-8 match the uninterrupted run"
grep -q "note: resuming with data settings other" "$work/b.log" && fail "a resume with the checkpoint's data settings noted a change"
# The same dataset spelled otherwise (a weight of 1, a relative path with ./) is no change.
(cd "$root" && "${cmd[@]}" --data.train "1 ./data/fortunes_byte" --train.steps 8 --checkpoint.dir "$work/ck") \
  >"$work/respelled.log" 2>&1 || { cat "$work/respelled.log"; fail "resume with the data spelled otherwise"; }
grep -q "resumed from $work/ck/step_8.h5 at step 8" "$work/respelled.log" ||
  { cat "$work/respelled.log"; fail "did not resume from step_8.h5"; }
grep -q "note: resuming with data settings other" "$work/respelled.log" &&
  fail "the same data spelled otherwise noted a change"
# A resume with other data settings runs, and says which differ.
train --train.steps 9 --train.seed 7 --checkpoint.dir "$work/ck" >"$work/e.log" 2>&1 ||
  { cat "$work/e.log"; fail "resume with another train.seed"; }
grep -q "note: resuming with data settings other than the checkpoint.*train.seed = 7 (checkpoint: " "$work/e.log" ||
  { cat "$work/e.log"; fail "no note of the changed train.seed"; }
echo "ok: a resume with another train.seed notes it"

# 2. SIGTERM to the ranks mid-training. A warm-up longer than any run keeps the learning rate
# independent of train.steps, so runs of different lengths are comparable step by step.
long=(--train.warmup_steps 100000)
# Started directly (not through the function) so that $! is mpirun and its children are the ranks.
"${cmd[@]}" --data.train "$root/data/fortunes_byte" "${long[@]}" --train.steps 100000 --checkpoint.dir "$work/ck2" \
  --log.metrics "$work/c.jsonl" >"$work/c.log" 2>&1 &
launcher=$!
for _ in $(seq 1 300); do
  [[ -f $work/c.jsonl ]] && (( $(wc -l <"$work/c.jsonl") >= 3 )) && break
  sleep 0.1
done
pkill -TERM -P "$launcher"
wait "$launcher"
status=$?
[[ $status -eq 0 ]] || { cat "$work/c.log"; fail "SIGTERM: exit status $status"; }
grep -q "stop signal received: checkpoint saved" "$work/c.log" || { cat "$work/c.log"; fail "no save on SIGTERM"; }
stopped=$(wc -l <"$work/c.jsonl")
[[ $(cat "$work/ck2/latest") == "step_$stopped.h5" ]] || fail "latest is not step_$stopped.h5"
end=$((stopped + 4))
train "${long[@]}" --train.steps "$end" --checkpoint.dir "$work/ck2" --log.metrics "$work/d.jsonl" >"$work/d.log" 2>&1 ||
  { cat "$work/d.log"; fail "resume after SIGTERM"; }
train "${long[@]}" --train.steps "$end" --log.metrics "$work/full2.jsonl" >"$work/full2.log" 2>&1 ||
  fail "uninterrupted run of $end steps"
cat "$work/c.jsonl" "$work/d.jsonl" >"$work/cd.jsonl"
[[ $(wc -l <"$work/cd.jsonl") -eq $end ]] || fail "expected $end steps across the stop"
diff <(losses "$work/full2.jsonl") <(losses "$work/cd.jsonl") || fail "losses across the SIGTERM stop differ"
echo "ok: SIGTERM after step $stopped saved and exited 0; resumed to step $end with losses identical to an uninterrupted run"
