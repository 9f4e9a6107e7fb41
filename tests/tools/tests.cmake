# Plotting and the measurement tools: a PNG from the fixture metrics; a 2-layout sweep on CPU
# ranks; kernel_trace.py's summary of a made-up trace; tools/perf/run.sh's errors and one check.
add_test(NAME tools_plot_metrics COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_plot_metrics.sh ${CMAKE_SOURCE_DIR})
add_test(NAME tools_kernel_trace COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_kernel_trace.sh ${CMAKE_SOURCE_DIR})
add_test(NAME tools_bench_sweep COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_bench_sweep.sh $<TARGET_FILE:trident>
         ${CMAKE_SOURCE_DIR} ${MPIEXEC_EXECUTABLE} ${TRIDENT_MPIEXEC_FLAGS})
add_test(NAME tools_perf_run COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_perf_run.sh $<TARGET_FILE:trident>
         ${CMAKE_SOURCE_DIR})
set_tests_properties(tools_plot_metrics tools_bench_sweep tools_kernel_trace tools_perf_run PROPERTIES LABELS unit
                     TIMEOUT 120)
set_tests_properties(tools_bench_sweep PROPERTIES ENVIRONMENT OMP_NUM_THREADS=1)
# bench_pytorch.py's Llama against hand-written attention, repeated KV heads, complex RoPE and its
# own parameter count, then two CPU steps and its errors (Debian's PyTorch, as the reference tests).
add_test(NAME tools_bench_pytorch_llama
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/tools/check_bench_llama.py ${CMAKE_SOURCE_DIR})
set_tests_properties(tools_bench_pytorch_llama PROPERTIES LABELS reference TIMEOUT 120
                     ENVIRONMENT OMP_NUM_THREADS=2)
