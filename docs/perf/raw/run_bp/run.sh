#!/usr/bin/env bash
# Run BP: the 1.5B-class tp2 step's short waits (run BL: the compute stream idle ~13% of the
# step; the GEMM that follows a fused-sum LayerNorm idle ~11 us more than other GEMMs). Is the
# gap still there since run BN moved the freed-flag write onto the link's flag stream, and does
# writing that flag without the driver's memory barrier (it releases memory this GPU only read)
# remove it? Binaries: bin/trident (freed flag without the barrier), bin/trident_base (2c4e97a).
# Kernel timelines of both (tools/kernel_trace, both ranks), alternating throughput, and
# cuda_layouts (fused sums must still equal plain tp2 exactly).
#   docs/perf/raw/run_bp/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
base=$b/bin/trident_base new=$b/bin/trident
check cuda_layouts 300 "${mp[@]}" -np 2 "$b/bin/cuda_layouts"
check cuda_tests 300 "$b/bin/cuda_tests"
for r in 1 2; do
  one big_g1_$r 1 "$new" "${m15[@]}"
  one big_split_base_$r 2 "$base" "${m15[@]}" "${split[@]}"
  one big_split_new_$r 2 "$new" "${m15[@]}" "${split[@]}"
  one g1_$r 1 "$new" "${m124[@]}" --train.global_batch_size 32
  one ce_$r 2 "$new" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
done
export CUDA_INJECTION64_PATH="$b/lib/libtrident_kernel_trace.so"
for v in base new; do
  TRIDENT_KERNEL_TRACE="$out/t_$v" one t_split_$v 2 "${!v}" "${m15[@]}" "${split[@]}"
done
unset CUDA_INJECTION64_PATH
for r in 0 1; do
  (unset LD_LIBRARY_PATH; timeout 120 python3 tools/kernel_trace/kernel_trace.py "$out/t_base.$r.csv" \
     "$out/t_new.$r.csv" --top 30 --gaps 25 >"$out/trace_rank$r.txt" 2>&1)
  head -2 "$out/trace_rank$r.txt" | tee -a "$out/summary.txt"
done
tar czf "$dest/traces_rank0.tgz" -C "$out" t_base.0.csv t_new.0.csv
rm -f "$out"/t_*.csv
finish
