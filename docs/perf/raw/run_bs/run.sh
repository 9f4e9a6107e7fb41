#!/usr/bin/env bash
# Run BS: the fused TP sums' release done by the LayerNorm kernel that reads the partial (its
# last block writes the other GPU's freed flag; PeerRelease), so nothing but kernels sits on the
# compute stream between a LayerNorm and the next GEMM (runs BP-BR: each stream operation there
# costs the stream ~4-6 us). Binaries: bin/trident (this), bin/trident_base (2c4e97a).
# cuda_tests (the LayerNorms leave each flag at its value and each counter at zero), cuda_layouts
# (fused sums still give plain tp2's losses exactly), alternating throughput, a timeline.
#   docs/perf/raw/run_bs/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
base=$b/bin/trident_base new=$b/bin/trident
check cuda_tests 300 "$b/bin/cuda_tests"
check cuda_layouts 300 "${mp[@]}" -np 2 "$b/bin/cuda_layouts"
for r in 1 2 3; do
  (( r < 3 )) && one big_g1_$r 1 "$new" "${m15[@]}"
  one big_split_base_$r 2 "$base" "${m15[@]}" "${split[@]}"
  one big_split_new_$r 2 "$new" "${m15[@]}" "${split[@]}"
done
export CUDA_INJECTION64_PATH="$b/lib/libtrident_kernel_trace.so"
TRIDENT_KERNEL_TRACE="$out/t_new" one t_split_new 2 "$new" "${m15[@]}" "${split[@]}"
unset CUDA_INJECTION64_PATH
(unset LD_LIBRARY_PATH; timeout 120 python3 tools/kernel_trace/kernel_trace.py "$out/t_new.0.csv" --top 0 --gaps 0 \
   --pairs 20 >"$out/pairs_new_rank0.txt" 2>&1)
head -6 "$out/pairs_new_rank0.txt" | tee -a "$out/summary.txt"
rm -f "$out"/t_*.csv
finish
