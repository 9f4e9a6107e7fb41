# trident doctor on 4 CPU ranks: healthy, unwritable checkpoint.dir, layout that does not fit.
add_test(NAME mpi_doctor_np4 COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/doctor/doctor.sh $<TARGET_FILE:trident>
         ${CMAKE_SOURCE_DIR} ${MPIEXEC_EXECUTABLE} ${TRIDENT_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG} 4)
set_tests_properties(mpi_doctor_np4 PROPERTIES LABELS mpi ENVIRONMENT OMP_NUM_THREADS=1 TIMEOUT 120)
