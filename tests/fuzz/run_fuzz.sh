#!/usr/bin/env bash
# Runs every fuzz target for a bounded time on its seed corpus (tests/fuzz/<target>/); fails on
# any crash, hang (an input running over 10 s), leak or sanitizer report.
#   run_fuzz.sh FUZZ_BUILD_DIR [SECONDS_PER_TARGET]   (default 60; FUZZ_SECONDS overrides too)
set -uo pipefail
build=$1
seconds=${2:-${FUZZ_SECONDS:-60}}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work   # the targets' scratch files go with it
fail=0
for target in fuzz_config fuzz_idx fuzz_checkpoint fuzz_tokenizer fuzz_safetensors; do
  # New inputs go to a scratch copy; the committed seeds stay as they are.
  mkdir -p "$work/$target"
  cp "$here/$target"/* "$work/$target/"
  if ! "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$work/$target-" -print_final_stats=1 "$work/$target" >"$work/$target.log" 2>&1; then
    echo "FAIL $target:"; tail -40 "$work/$target.log"
    for a in "$work/$target"-*; do [[ -e $a ]] && echo "  reproducer: $(base64 -w0 "$a")"; done
    fail=1
  else
    echo "ok   $target: $(grep -m1 'stat::number_of_executed_units' "$work/$target.log" | awk '{print $2}') inputs in ${seconds} s"
  fi
done
exit $fail
