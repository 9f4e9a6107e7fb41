// Parallel-HDF5 self-test of a directory (`trident doctor`): every rank writes its hyperslab of
// one file collectively through MPI-IO, reads back another rank's, and the file is removed.
#pragma once

#include <mpi.h>

#include <string>

namespace trident {

struct IoProbeResult {
  std::string error;            // empty when the write, the read-back and the removal all worked
  double bytes = 0;             // file size (all ranks together)
  double write_s = 0, read_s = 0;
};

// Collective over comm; every rank gets the same result. `dir` must exist.
IoProbeResult probe_parallel_hdf5(const std::string& dir, MPI_Comm comm, size_t bytes_per_rank);

// "HDF5 1.10.8" of the library trident runs with.
std::string hdf5_version();

}  // namespace trident
