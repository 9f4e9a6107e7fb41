# cuda: every CudaBackend op against the CpuBackend (each test skips with "no GPU: CUDA tests
# skipped" where no GPU is present, so CI without a GPU passes and shows the skip).
add_executable(cuda_tests ${CMAKE_CURRENT_LIST_DIR}/test_cuda_ops.cpp)
target_link_libraries(cuda_tests PRIVATE trident_test_support trident_cuda GTest::gtest)
target_compile_options(cuda_tests PRIVATE ${TRIDENT_WARNINGS})
add_test(NAME cuda_ops COMMAND cuda_tests)
# ctest reports the run as skipped (not passed) when the binary found no GPU.
set_tests_properties(cuda_ops PROPERTIES LABELS cuda SKIP_REGULAR_EXPRESSION "no GPU: CUDA tests skipped")

# The same attention tests on the wgmma engine's single-warpgroup forward (the default at head
# size 64 on H100/H200 is the warp-specialized one) and on the mma.sync engine.
foreach(kernels wgmma mma)
  add_test(NAME cuda_ops_attention_${kernels} COMMAND cuda_tests --gtest_filter=CudaOps.Attention*
           --attention-kernels ${kernels})
  set_tests_properties(cuda_ops_attention_${kernels} PROPERTIES LABELS cuda
                       SKIP_REGULAR_EXPRESSION "no GPU: CUDA tests skipped")
endforeach()

# Whole-model checks on GPUs under mpirun: one step against the CPU backend, and the 2-GPU
# layouts against one GPU (skipped with the same message without GPUs).
add_executable(cuda_layouts ${CMAKE_CURRENT_LIST_DIR}/test_cuda_layouts.cpp ${CMAKE_CURRENT_LIST_DIR}/../support/mpi_main.cpp)
target_link_libraries(cuda_layouts PRIVATE trident_test_support trident_cuda trident_parallel_nccl)
add_test(NAME cuda_layouts COMMAND ${MPIEXEC_EXECUTABLE} -np 2 ${TRIDENT_MPIEXEC_FLAGS} -x NCCL_NVLS_ENABLE=0
         $<TARGET_FILE:cuda_layouts>)
set_tests_properties(cuda_layouts PROPERTIES LABELS cuda ENVIRONMENT NCCL_NVLS_ENABLE=0
                     SKIP_REGULAR_EXPRESSION "no GPU: CUDA tests skipped")
# The 4-GPU layouts (sequence parallelism with and without fused sums at tp 4): skipped, with
# the message above, without GPUs, and with "needs 4 GPUs" where fewer are there.
add_test(NAME cuda_layouts_4gpu COMMAND ${MPIEXEC_EXECUTABLE} -np 4 ${TRIDENT_MPIEXEC_FLAGS} -x NCCL_NVLS_ENABLE=0
         $<TARGET_FILE:cuda_layouts> --gtest_filter=CudaLayouts.FourGpu*)
set_tests_properties(cuda_layouts_4gpu PROPERTIES LABELS cuda ENVIRONMENT NCCL_NVLS_ENABLE=0
                     SKIP_REGULAR_EXPRESSION "no GPU: CUDA tests skipped;needs 4 GPUs")

if(TRIDENT_TEST_HOOKS)
  add_test(NAME cuda_launch_checks COMMAND ${CMAKE_CURRENT_LIST_DIR}/launch_checks.sh $<TARGET_FILE:trident>
           $<TARGET_FILE:trident_test> ${CMAKE_SOURCE_DIR} ${MPIEXEC_EXECUTABLE} ${TRIDENT_MPIEXEC_FLAGS})
  set_tests_properties(cuda_launch_checks PROPERTIES LABELS cuda SKIP_RETURN_CODE 77)
endif()
