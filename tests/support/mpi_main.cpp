// gtest main for tests run under mpirun: every rank runs every test; only rank 0 prints, and
// the exit status is the same on all ranks (failure anywhere fails the run).
#include <gtest/gtest.h>
#include <mpi.h>

#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/parallel/mpi_comm.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  trident::set_log_rank(rank == 0);
  trident::set_error_context(trident::str("[rank ", rank, "]"), trident::mpi_abort);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
