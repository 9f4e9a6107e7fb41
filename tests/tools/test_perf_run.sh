#!/usr/bin/env bash
# tools/perf/run.sh without a GPU: bad commands and a missing bundle exit 2 with one line; `checks`
# on a bundle holding the CPU build (nvidia-smi faked on PATH) runs the `kernels` check, reports an
# unknown check, exits 1 for it, and leaves summary.txt, gpus.txt and the log in logs.tgz; the
# llama_peers check starts its two PyTorch peers (faked) as it should on 2 GPUs.
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
# llama_peers on 2 GPUs, PyTorch faked: the 1B peer, then the 8B peer under torchrun on 2 ranks with
# its layers cut to LLAMA8B_LAYERS, each with its formula lines in summary.txt.
mkdir -p "$dir/fake2"
cat >"$dir/fake2/nvidia-smi" <<'SH'
#!/bin/sh
case $1 in -L) printf 'GPU 0: Fake GPU (UUID: GPU-0)\nGPU 1: Fake GPU (UUID: GPU-1)\n' ;; *) echo "Fake GPU, 0 MiB" ;; esac
SH
printf '#!/bin/sh\necho "llama  N = 1"\necho "pytorch fake: $*"\n' >"$dir/fake2/python3"
printf '#!/bin/sh\necho "llama  N = 2"\necho "torchrun fake: $*"\n' >"$dir/fake2/torchrun"
chmod +x "$dir/fake2/"*
LLAMA8B_LAYERS=8 PATH="$dir/fake2:$PATH" "$run" checks "$dir/bundle" "$dir/peers" llama_peers >"$dir/stdout" 2>&1 ||
  fail "llama_peers: $(cat "$dir/stdout")"
grep -q '^pytorch_llama1b_1gpu: exit 0 pytorch fake: .*--preset llama3.2-1b' "$dir/peers/summary.txt" ||
  fail "no 1B peer in summary.txt"
grep -q '^pytorch_llama8b_fsdp2_l8: exit 0 torchrun fake: --nproc_per_node 2 .*--preset llama3-8b --fsdp --layers 8 ' \
  "$dir/peers/summary.txt" || fail "no 8B FSDP2 peer with 8 layers in summary.txt"
grep -q '^pytorch_llama8b_fsdp2_l8: N = 2' "$dir/peers/summary.txt" || fail "the 8B peer's formula lines"
echo "ok: tools/perf/run.sh"
