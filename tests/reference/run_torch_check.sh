#!/usr/bin/env bash
# ctest driver: run a reference dumper (DUMP DIR [ARGS...]), then check its output with a PyTorch
# script.   run_torch_check.sh DUMP SCRIPT [ARGS...]
set -euo pipefail
dump=$1
script=$2
shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$dump" "$out" "$@"
/usr/bin/python3 "$script" "$out"
