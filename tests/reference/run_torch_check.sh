#!/usr/bin/env bash
# ctest driver: run a reference dumper (DUMP DIR), then check its output with a PyTorch script.
set -euo pipefail
dump=$1
script=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$dump" "$out"
/usr/bin/python3 "$script" "$out"
