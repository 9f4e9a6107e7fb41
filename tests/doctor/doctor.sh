#!/usr/bin/env bash
# trident doctor on CPU ranks: a healthy tp=2 launch exits 0 and prints the rank map; an
# unwritable checkpoint.dir (under a regular file, so even root cannot create it) and a layout
# that does not fit the world each exit non-zero with their diagnosis line.
#   doctor.sh TRIDENT REPO_ROOT MPIRUN ARGS... (ending in -np 4)
set -uo pipefail
trident=$1 root=$2
shift 2
launcher=("$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
run() {   # output file, trident flags...
  local file=$1
  shift
  "${launcher[@]}" "$trident" doctor --config "$root/inputs/models/tiny.cfg" --backend cpu --allreduce-mib 1 \
    --io-mib 1 "$@" >"$file" 2>&1
}
expect() {   # description, condition...
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}

run "$out/healthy" --parallel.tp 2 --checkpoint.dir "$out/ckpt"
rc=$?
cat "$out/healthy"
expect "healthy: exit 0" test $rc -eq 0
expect "healthy: says so" grep -q "trident doctor: healthy" "$out/healthy"
expect "healthy: rank map header" grep -qE "rank +host +local +GPU +tp +pp +dp" "$out/healthy"
# Ranks are tp fastest, then dp: rank 3 is tp 1, pp 0, dp 1.
expect "healthy: rank 3 at tp 1 pp 0 dp 1" grep -qE "^ +3 +[^ ]+ +[0-9]+ +- +1 +0 +1$" "$out/healthy"
for axis in tp dp world; do
  expect "healthy: $axis all-reduce verified" grep -qE "^  $axis +[0-9]+ ranks +ok .*busbw" "$out/healthy"
done
expect "healthy: parallel HDF5 checked" grep -q "parallel HDF5 ok" "$out/healthy"
expect "healthy: probe file removed" test -z "$(ls -A "$out/ckpt")"

touch "$out/file"
run "$out/unwritable" --parallel.tp 2 --checkpoint.dir "$out/file/ckpt"
rc=$?
cat "$out/unwritable"
expect "unwritable checkpoint.dir: non-zero exit" test $rc -ne 0
expect "unwritable checkpoint.dir: diagnosis line" \
  grep -q "^trident doctor: problem: checkpoint.dir = $out/file/ckpt: cannot create" "$out/unwritable"

run "$out/layout" --parallel.tp 3
rc=$?
expect "tp that does not divide the world: non-zero exit" test $rc -ne 0
expect "tp that does not divide the world: diagnosis names parallel.tp" \
  grep -q "^trident doctor: problem: parallel.tp" "$out/layout"
exit $fail
