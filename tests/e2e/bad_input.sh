#!/usr/bin/env bash
# e2e: bad input exits with status 2 and one line on stderr, before anything is written.
#   bad_input.sh TRIDENT REPO_ROOT
set -uo pipefail
trident=$1 root=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
expect_2() {   # description, expected fragment, args...
  local what=$1 fragment=$2
  shift 2
  "$trident" "$@" >"$out/stdout" 2>"$out/stderr"
  local rc=$? lines
  lines=$(wc -l <"$out/stderr")
  if [[ $rc -ne 2 || $lines -ne 1 ]] || ! grep -q -- "$fragment" "$out/stderr"; then
    echo "FAIL $what: rc=$rc, $lines stderr lines:"; cat "$out/stderr"; fail=1
  else
    echo "ok   $what: $(cat "$out/stderr")"
  fi
}
printf '[model]\nn_layer = 2\nnot a key value line\n' >"$out/bad.cfg"
expect_2 "malformed INI line" "bad.cfg:3" train --config "$out/bad.cfg"
expect_2 "n_embd vs n_head" "model.n_embd" train --config "$root/inputs/models/tiny.cfg" --model.n_head 5
expect_2 "missing data file" "nonexistent" train --config "$root/inputs/models/tiny.cfg" --data.train "$out/nonexistent"
expect_2 "unknown option" "model.n_layers" train --model.n_layers 3
expect_2 "unknown command" "frobnicate" frobnicate
expect_2 "stray argument to train" "unexpected argument 'stray'" train --config "$root/inputs/models/tiny.cfg" stray
expect_2 "stray argument to bench" "unexpected argument 'stray'" bench --config "$root/inputs/models/tiny.cfg" stray
expect_2 "metrics path is a directory" "log.metrics" train --config "$root/inputs/models/tiny.cfg" \
  --data.train "$root/data/fortunes_byte" --log.metrics "$out"
expect_2 "negative bench.profile_steps" "bench.profile_steps" bench --config "$root/inputs/models/tiny.cfg" \
  --backend cpu --bench.profile_steps -1
"$trident" train --help >"$out/help" 2>&1 || { echo "FAIL train --help"; fail=1; }
grep -q "parallel.schedule" "$out/help" || { echo "FAIL train --help lacks parallel.schedule"; fail=1; }
exit $fail
