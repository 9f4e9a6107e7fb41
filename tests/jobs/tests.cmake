# The cluster job files (jobs/) run against stub launchers and schedulers, plus bash -n and shellcheck.
add_test(NAME jobs_launch_commands COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/jobs/test_job_files.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(jobs_launch_commands PROPERTIES LABELS unit TIMEOUT 120)
# The job files under the real mpirun and trident_test (its slow-step hook): a stop signal saves,
# exits 0 and requeues.
if(TRIDENT_TEST_HOOKS)
  add_test(NAME jobs_stop_signals COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/jobs/job_signals.sh
           $<TARGET_FILE:trident_test> ${CMAKE_SOURCE_DIR})
  set_tests_properties(jobs_stop_signals PROPERTIES LABELS mpi TIMEOUT 300)
endif()
