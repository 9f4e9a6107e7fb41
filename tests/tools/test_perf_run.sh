#!/usr/bin/env bash
# tools/perf/run.sh without a GPU: bad commands and a missing bundle exit 2 with one line; `checks`
# on a bundle holding the CPU build (nvidia-smi faked on PATH) runs the `kernels` check, reports an
# unknown check, exits 1 for it, and leaves summary.txt, gpus.txt and the log in logs.tgz.
#   test_perf_run.sh TRIDENT REPO_ROOT
set -uo pipefail
trident=$1 root=$2
run=$root/tools/perf/run.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $1"; exit 1; }

"$run" nonsense 2>"$dir/err"
[[ $? == 2 && $(cat "$dir/err") == *"unknown command 'nonsense'"* ]] || fail "unknown command: $(cat "$dir/err")"
"$run" checks "$dir/no_bundle" "$dir/out" 2>"$dir/err"
[[ $? == 2 && $(cat "$dir/err") == *"no_bundle/bin/trident not found"* ]] || fail "missing bundle: $(cat "$dir/err")"

mkdir -p "$dir/bundle/bin" "$dir/bundle/lib" "$dir/fake"
ln -s "$trident" "$dir/bundle/bin/trident"
cat >"$dir/fake/nvidia-smi" <<'SH'
#!/bin/sh
case $1 in -L) echo "GPU 0: Fake GPU (UUID: GPU-0)" ;; *) echo "Fake GPU, 0 MiB, 700.00 W, 1980 MHz, 0.0" ;; esac
SH
chmod +x "$dir/fake/nvidia-smi"
PATH="$dir/fake:$PATH" "$run" checks "$dir/bundle" "$dir/out" kernels bogus >"$dir/stdout" 2>&1
status=$?
cat "$dir/stdout"
[[ $status == 1 ]] || fail "exit status $status with an unknown check (want 1)"
grep -q '^kernels: exit 0 ' "$dir/out/summary.txt" || fail "no passing kernels line in summary.txt"
grep -q "unknown check 'bogus'" "$dir/out/summary.txt" || fail "the unknown check is not in summary.txt"
grep -q '^Fake GPU' "$dir/out/gpus.txt" || fail "gpus.txt"
tar tzf "$dir/out/logs.tgz" | grep -q 'kernels.log' || fail "kernels.log not in logs.tgz"
[[ ! -e $dir/out/logs ]] || fail "the logs folder was not packed away"
echo "ok: tools/perf/run.sh"
