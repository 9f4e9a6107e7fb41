#!/usr/bin/env bash
# Run BQ: flags that only free memory this GPU has been reading (PeerLink's freed flags, CopyLink's
# ready flags) written by a one-thread kernel instead of the driver's stream write (which puts a
# memory barrier before the flag). Run BP's timelines: the GEMM after each fused-sum LayerNorm
# starts ~6 us later than other GEMMs. Binaries: bin/trident (kernel-written flags),
# bin/trident_base (2c4e97a). Alternating throughput (1.5B-class tp2 fused + split; GPT-2 124M dp2
# ZeRO-1 with the copy engines), both ranks' timelines of the tp2 step, cuda_layouts (fused sums
# and copy engines must still give their reference paths' losses exactly).
#   docs/perf/raw/run_bq/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
base=$b/bin/trident_base new=$b/bin/trident
check cuda_layouts 300 "${mp[@]}" -np 2 "$b/bin/cuda_layouts"
check cuda_tests 300 "$b/bin/cuda_tests"
for r in 1 2; do
  one big_g1_$r 1 "$new" "${m15[@]}"
  one big_split_base_$r 2 "$base" "${m15[@]}" "${split[@]}"
  one big_split_new_$r 2 "$new" "${m15[@]}" "${split[@]}"
  one g1_$r 1 "$new" "${m124[@]}" --train.global_batch_size 32
  one ce_base_$r 2 "$base" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
  one ce_new_$r 2 "$new" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
done
one big_split_base_3 2 "$base" "${m15[@]}" "${split[@]}"
one big_split_new_3 2 "$new" "${m15[@]}" "${split[@]}"
one ce_base_3 2 "$base" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
one ce_new_3 2 "$new" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
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
tar czf "$dest/traces.tgz" -C "$out" t_base.0.csv t_new.0.csv t_base.1.csv t_new.1.csv
rm -f "$out"/t_*.csv
finish
