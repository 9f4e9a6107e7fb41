# MPI tests on CPU ranks: communication ops, and every layout against one rank.
trident_mpi_test(test_comm NP 3 4)
trident_mpi_test(test_equivalence NP 2 4 8)
trident_mpi_test(test_checkpoint NP 8)
trident_mpi_test(test_generation NP 2)
trident_mpi_test(test_step_guard NP 2)
trident_mpi_test(test_trace_ranges NP 2)
