# The planner against a real training step (CPU ranks): memory to the byte, and parallel.auto.
add_executable(test_planner_memory ${CMAKE_CURRENT_SOURCE_DIR}/planner/test_planner_memory.cpp
               ${CMAKE_CURRENT_SOURCE_DIR}/support/mpi_main.cpp)
target_link_libraries(test_planner_memory PRIVATE trident_test_support trident_io)
add_test(NAME mpi_planner_memory_np4 COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 ${TRIDENT_MPIEXEC_FLAGS}
         $<TARGET_FILE:test_planner_memory>)
set_tests_properties(mpi_planner_memory_np4 PROPERTIES LABELS mpi ENVIRONMENT OMP_NUM_THREADS=1)
add_test(NAME mpi_parallel_auto_np4 COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/planner/auto_layout.sh $<TARGET_FILE:trident>
         ${CMAKE_SOURCE_DIR} ${MPIEXEC_EXECUTABLE} ${TRIDENT_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG} 4)
set_tests_properties(mpi_parallel_auto_np4 PROPERTIES LABELS mpi ENVIRONMENT OMP_NUM_THREADS=1 TIMEOUT 120)
add_test(NAME mpi_gpus_per_node_np4 COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/planner/gpus_per_node.sh $<TARGET_FILE:trident>
         ${CMAKE_SOURCE_DIR} ${MPIEXEC_EXECUTABLE} ${TRIDENT_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG} 4)
set_tests_properties(mpi_gpus_per_node_np4 PROPERTIES LABELS "mpi;e2e" ENVIRONMENT OMP_NUM_THREADS=1 TIMEOUT 120)
