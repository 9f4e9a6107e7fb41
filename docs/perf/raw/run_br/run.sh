#!/usr/bin/env bash
# Run BR: PeerLink's freed flags deferred to the link's next send or wait (run BQ: the event that
# released a partial, recorded between a fused-sum LayerNorm and the next GEMM, delayed that GEMM
# by ~6 us; the next send or wait already separates two kernels). Binaries: bin/trident (deferred
# releases + kernel-written flags), bin/trident_kf (kernel-written flags only: run BQ's),
# bin/trident_base (2c4e97a). Alternating throughput of the 1.5B-class tp2 (fused + split), the
# new binary's timelines, cuda_layouts; then this session's target runs: GPT-2 124M 1 GPU,
# dp2 ZeRO-1 with the copy engines, the PyTorch baseline.
#   docs/perf/raw/run_br/run.sh BUNDLE OUT
source tools/perf_lib.sh "$1" "$2"
base=$b/bin/trident_base kf=$b/bin/trident_kf new=$b/bin/trident
check cuda_layouts 300 "${mp[@]}" -np 2 "$b/bin/cuda_layouts"
check cuda_tests 300 "$b/bin/cuda_tests"
for r in 1 2 3; do
  (( r < 3 )) && one big_g1_$r 1 "$new" "${m15[@]}"
  one big_split_base_$r 2 "$base" "${m15[@]}" "${split[@]}"
  one big_split_kf_$r 2 "$kf" "${m15[@]}" "${split[@]}"
  one big_split_new_$r 2 "$new" "${m15[@]}" "${split[@]}"
done
export CUDA_INJECTION64_PATH="$b/lib/libtrident_kernel_trace.so"
TRIDENT_KERNEL_TRACE="$out/t_new" one t_split_new 2 "$new" "${m15[@]}" "${split[@]}"
unset CUDA_INJECTION64_PATH
(unset LD_LIBRARY_PATH; timeout 120 python3 tools/kernel_trace/kernel_trace.py "$out/t_new.0.csv" "$out/t_new.1.csv" \
   --top 30 --gaps 25 >"$out/trace_ranks.txt" 2>&1)
tar czf "$dest/traces.tgz" -C "$out" t_new.0.csv t_new.1.csv
rm -f "$out"/t_*.csv
for r in 1 2; do
  one g1_$r 1 "$new" "${m124[@]}" --train.global_batch_size 32
  one ce_$r 2 "$new" "${m124[@]}" "${z1[@]}" --parallel.dp_copy_engine true
done
pytorch pytorch124m --batch 32 --seq 1024 --steps 20
finish
