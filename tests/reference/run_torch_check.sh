#!/usr/bin/env bash
# ctest driver: dump trident's CPU reference run, then check it with PyTorch.
set -euo pipefail
dump=$1
script=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$dump" "$out"
/usr/bin/python3 "$script" "$out"
