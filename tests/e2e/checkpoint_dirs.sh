#!/usr/bin/env bash
# Checkpoint directories that a run must not lose or misuse (one CPU rank):
#  1. 'latest' missing, empty or older than a complete step file: resume from the newest step file
#     and say so; a newest file that is damaged stops the run (exit 2) and nothing is touched;
#  2. a fresh run, or one resumed from elsewhere or from an older step, in a directory holding
#     checkpoints it did not resume from: exit 2 naming checkpoint.overwrite, nothing touched;
#     with checkpoint.overwrite = true the run replaces them and keeps what it writes;
#  3. links pre-placed at step_<n>.h5.tmp and latest.tmp are not followed; a 'latest' naming a
#     path outside the directory is refused; a 'latest' that cannot be written fails the save;
#  4. a checkpoint of 4 layers does not load into a 2-layer model;
#  5. a directory given as a checkpoint: one line, exit 2; log.metrics' directory is created.
#   checkpoint_dirs.sh TRIDENT REPO_ROOT
set -uo pipefail
trident=$(realpath "$1") root=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
train() {
  "$trident" train --config "$root/inputs/models/tiny.cfg" --backend cpu --data.train "$root/data/fortunes_byte" \
    --model.seq_len 32 --model.n_layer "${n_layer:-2}" --train.micro_batch_size 2 --train.global_batch_size 4 --log.every 1 "$@"
}
fail() { echo "FAIL: $*"; exit 1; }
# Names, sizes, times and contents of everything under a directory (links shown as links).
# Directory times are left out: the MPI-IO layer may create and remove lock files next to a file
# it opens.
snapshot() {
  (cd "$1" && find . -type d | sort && find . ! -type d -printf '%p %y %s %T@ %l\n' | sort &&
    find . -type f -exec md5sum {} + | sort)
}
# Runs train, expecting exit 2 with one line on stderr holding the fragment.
expect_2() {   # description, fragment, args...
  local what=$1 fragment=$2
  shift 2
  train "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [[ $rc -eq 2 && $(wc -l <"$work/err") -eq 1 ]] && grep -q -- "$fragment" "$work/err" ||
    { cat "$work/out" "$work/err"; fail "$what: rc=$rc, expected 2 and one line with '$fragment'"; }
  echo "ok: $what: $(cat "$work/err")"
}
resumed_from() {   # log, file, step
  grep -q "resumed from $2 at step $3 " "$1" || { cat "$1"; fail "did not resume from $2 at step $3"; }
}

train --train.steps 6 --checkpoint.dir "$work/base" --checkpoint.every 2 >"$work/base.log" 2>&1 ||
  { cat "$work/base.log"; fail "first run"; }
[[ $(cat "$work/base/latest") == step_6.h5 ]] || fail "latest of the first run is not step_6.h5"

# 1. latest missing, empty, or older than the newest complete step file.
for case in missing empty stale; do
  cp -a "$work/base" "$work/$case"
  case $case in
    missing) rm "$work/$case/latest" ;;
    empty) : >"$work/$case/latest" ;;
    stale) echo step_4.h5 >"$work/$case/latest" ;;
  esac
  train --train.steps 8 --checkpoint.dir "$work/$case" --checkpoint.every 2 >"$work/$case.log" 2>&1 ||
    { cat "$work/$case.log"; fail "latest $case: run failed"; }
  grep -q "^note: $work/$case/latest .*resuming from .*step_6.h5" "$work/$case.log" ||
    { cat "$work/$case.log"; fail "latest $case: no note naming step_6.h5"; }
  resumed_from "$work/$case.log" "$work/$case/step_6.h5" 6
  [[ $(cat "$work/$case/latest") == step_8.h5 ]] || fail "latest $case: latest is not step_8.h5 after the run"
  echo "ok: latest $case: resumed from step_6.h5 and said so"
done
cp -a "$work/base" "$work/damaged"
rm "$work/damaged/latest"
head -c 1000 "$work/base/step_6.h5" >"$work/damaged/step_6.h5"
before=$(snapshot "$work/damaged")
expect_2 "latest missing and the newest step file damaged" "damaged/step_6.h5.*chosen by checkpoint.resume = auto" \
  --train.steps 8 --checkpoint.dir "$work/damaged" --checkpoint.every 2
[[ $(snapshot "$work/damaged") == "$before" ]] || fail "the refused run changed $work/damaged"

# 2. Checkpoints this run did not resume from.
cp -a "$work/base" "$work/fresh"
before=$(snapshot "$work/fresh")
expect_2 "a fresh run in another run's directory" "checkpoint.overwrite = true" \
  --train.steps 2 --checkpoint.resume none --checkpoint.dir "$work/fresh" --checkpoint.every 1
expect_2 "a resume from an older step with later ones present" "resumes from $work/fresh/step_4.h5 at step 4" \
  --train.steps 8 --checkpoint.resume "$work/fresh/step_4.h5" --checkpoint.dir "$work/fresh"
expect_2 "a resume from elsewhere into a directory with checkpoints" "resumes from $work/base/step_6.h5" \
  --train.steps 8 --checkpoint.resume "$work/base/step_6.h5" --checkpoint.dir "$work/fresh"
[[ $(snapshot "$work/fresh") == "$before" ]] || fail "a refused run changed $work/fresh"
train --train.steps 3 --checkpoint.resume none --checkpoint.overwrite true --checkpoint.dir "$work/fresh" \
  --checkpoint.every 1 --checkpoint.keep 2 >"$work/fresh.log" 2>&1 || { cat "$work/fresh.log"; fail "overwrite run"; }
[[ $(cd "$work/fresh" && echo *) == "latest step_2.h5 step_3.h5" ]] ||
  fail "after the overwrite run the directory holds $(cd "$work/fresh" && echo *)"
[[ $(cat "$work/fresh/latest") == step_3.h5 ]] || fail "latest is not step_3.h5 after the overwrite run"
"$trident" train --help | grep "checkpoint.overwrite" >/dev/null || fail "train --help does not show checkpoint.overwrite"
echo "ok: checkpoint.overwrite = true replaced the other run's checkpoints and kept its own"

# 3. Links at the temporary names, and a 'latest' that leads outside the directory.
mkdir "$work/links"
echo precious >"$work/target1"
echo precious >"$work/target2"
ln -s "$work/target1" "$work/links/step_2.h5.tmp"
ln -s "$work/target2" "$work/links/latest.tmp"
train --train.steps 2 --checkpoint.dir "$work/links" >"$work/links.log" 2>&1 || { cat "$work/links.log"; fail "links run"; }
[[ $(cat "$work/target1") == precious && $(cat "$work/target2") == precious ]] ||
  fail "a save wrote through a link at a temporary name"
[[ -f $work/links/step_2.h5 && ! -L $work/links/step_2.h5 && ! -L $work/links/latest ]] ||
  fail "step_2.h5 or latest is a link"
mkdir "$work/outside"
echo ../base/step_6.h5 >"$work/outside/latest"
expect_2 "'latest' naming a path outside the directory" "not the file name of a checkpoint" \
  --train.steps 8 --checkpoint.dir "$work/outside"
echo "ok: links at temporary names were replaced, not followed"
# A 'latest' that cannot be written fails the save (here latest.tmp is a directory that cannot be
# removed; a full disk is checked by the unit test CheckpointDir.LatestWriteThatFallsShort...).
mkdir -p "$work/nolatest/latest.tmp/x"
train --train.steps 2 --checkpoint.dir "$work/nolatest" >"$work/nolatest.log" 2>&1 &&
  { cat "$work/nolatest.log"; fail "a save whose 'latest' could not be written exited 0"; }
grep -q "step_2.h5 was written but 'latest' was not updated: removing the stale .*latest.tmp" "$work/nolatest.log" ||
  { cat "$work/nolatest.log"; fail "no message naming the failed update of 'latest'"; }
[[ -d $work/nolatest/latest.tmp && ! -e $work/nolatest/latest ]] || fail "the failed save changed latest"
echo "ok: a 'latest' that cannot be written fails the save"

# 4. A deeper model's checkpoint into a shallower one.
n_layer=4 train --train.steps 2 --checkpoint.dir "$work/deep" >"$work/deep.log" 2>&1 ||
  { cat "$work/deep.log"; fail "4-layer run"; }
before=$(snapshot "$work/deep")
expect_2 "a 4-layer checkpoint into a 2-layer model" "dataset /model/blocks.2.* is not part of the configured model" \
  --train.steps 4 --checkpoint.dir "$work/deep"
[[ $(snapshot "$work/deep") == "$before" ]] || fail "the refused load changed $work/deep"

# 5. A directory as the checkpoint; log.metrics in a directory that does not exist yet.
expect_2 "a directory as checkpoint.resume" "not a regular file" --train.steps 2 --checkpoint.resume "$work/base"
mkdir -p "$work/dirlatest/step_9.h5"
echo step_9.h5 >"$work/dirlatest/latest"
expect_2 "'latest' naming a directory" "not a regular file" --train.steps 2 --checkpoint.dir "$work/dirlatest"
train --train.steps 2 --log.metrics "$work/new/sub/m.jsonl" >"$work/metrics.log" 2>&1 ||
  { cat "$work/metrics.log"; fail "run with log.metrics in a new directory"; }
[[ $(wc -l <"$work/new/sub/m.jsonl") -eq 2 ]] || fail "log.metrics in a new directory was not written"
echo "ok: log.metrics' directory was created"
