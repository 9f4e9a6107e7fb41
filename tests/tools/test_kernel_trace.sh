#!/usr/bin/env bash
# tools/perf/kernel_trace/kernel_trace.py on a made-up trace (no GPU needed): two kernels alternating
# on one stream, 2 us idle after the first and 10 us after the second, plus a kernel on another
# stream and a copy. The summary must report the busy share and the idle time by kernel, and
# --pairs the idle time by kernel pair with its mean, p10 and median (trident's mangled kernel
# names shortened to the function's name).
#   test_kernel_trace.sh REPO_ROOT
set -euo pipefail
root=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir/t.0.csv" <<'PY'
import sys
gemm = "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT"
ln = "_ZN7trident3gpu45_GLOBAL__N__306a339c_12_layernorm_cu_df54bb5520layernorm_fwd_kernelILi8ELb1EEEvP13__nv_bfloat16"
t = 1_000_000
with open(sys.argv[1], "w") as f:
    for i in range(400):
        f.write(f"K,{t},{t + 20_000},0,14,{gemm}\n")   # 20 us, then 2 us idle
        t += 22_000
        f.write(f"K,{t},{t + 8_000},0,14,{ln}\n")      # 8 us, then 10 us idle
        t += 18_000
    f.write(f"K,{t},{t + 5_000},0,20,side_kernel\n")
    f.write(f"M,{t},{t + 4_000},0,30,12582912,8\n")
PY
out=$(/usr/bin/python3 "$root/tools/perf/kernel_trace/kernel_trace.py" "$dir/t.0.csv" --pairs 4)
echo "$out"
fail() { echo "FAIL: $1"; exit 1; }
# The summary covers the second half of the trace: 200 of each kernel, 199 + 200 gaps.
grep -q "stream 14: 400 kernels running 69.96%, gaps 2.390 ms" <<<"$out" || fail "the main stream's busy share and gaps"
grep -Eq "^ +layernorm_fwd_kernel +-> nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT +199 +1\.990 +10\.00 +10\.00 +10\.00$" \
  <<<"$out" || fail "the layernorm -> gemm pair (199 gaps of 10 us)"
grep -Eq "^ +nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT +-> layernorm_fwd_kernel +200 +0\.400 +2\.00 +2\.00 +2\.00$" \
  <<<"$out" || fail "the gemm -> layernorm pair (200 gaps of 2 us)"
echo "ok: kernel_trace.py summary and pairs"
