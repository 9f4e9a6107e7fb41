#!/usr/bin/env bash
# Run BO (as it ran; part 2 was not run): the attention kernels with head-major block order (the
# blocks of one (b, h) launched together, so the tiles they stream come from L2) and, at HS 64 on
# wgmma, two warpgroups per forward/dQ block (128 query rows sharing each key/value tile):
# attention_order_groups.patch, reverted after this run. Binaries: bin/trident (the patch, two
# groups by default; TRIDENT_ATTENTION_GROUPS=1 for one), bin/trident_base (2c4e97a),
# bin/trident_l2 (the block order alone, before launch bounds held the registers).
#   docs/perf/raw/run_bo/run.sh BUNDLE OUT 1|2
# (When this ran, tools/perf_lib.sh wrote the logs straight into OUT; see summary.txt.)
source tools/perf_lib.sh "$1" "$2"
base=$b/bin/trident_base new=$b/bin/trident l2=$b/bin/trident_l2
if [[ $3 == 1 ]]; then
  check cuda_tests 300 "$b/bin/cuda_tests"
  TRIDENT_ATTENTION_GROUPS=1 check cuda_tests_g1 300 "$b/bin/cuda_tests" --gtest_filter='*Attention*'
  TRIDENT_ATTENTION_KERNELS=mma check cuda_tests_mma 300 "$b/bin/cuda_tests" --gtest_filter='*Attention*'
  TRIDENT_ATTENTION_KERNELS=mma TRIDENT_ATTENTION_GROUPS=2 check cuda_tests_mma_g2 300 "$b/bin/cuda_tests" \
    --gtest_filter='*Attention*'
  for v in base l2 new; do check kernels_$v 200 "${!v}" bench --bench.kernels; done
  TRIDENT_ATTENTION_GROUPS=1 check kernels_new_g1 200 "$new" bench --bench.kernels
  for r in 1 2 3; do
    one g1_base_$r 1 "$base" "${m124[@]}" --train.global_batch_size 32
    one g1_new_$r 1 "$new" "${m124[@]}" --train.global_batch_size 32
    one g1_l2_$r 1 "$l2" "${m124[@]}" --train.global_batch_size 32
    TRIDENT_ATTENTION_GROUPS=1 one g1_new_g1_$r 1 "$new" "${m124[@]}" --train.global_batch_size 32
    (( r < 3 )) && pytorch pytorch124m_$r --batch 32 --seq 1024 --steps 20
  done
fi
# The kernel rows in summary.txt came from a second command in the same lease:
#   for v in trident_base trident_l2 trident; do $b/bin/$v bench --bench.kernels; done
#   TRIDENT_ATTENTION_GROUPS=1 $b/bin/trident bench --bench.kernels; $b/bin/trident_base bench --bench.kernels
cd "$out" && tar czf part$3.tgz *.log *.txt
