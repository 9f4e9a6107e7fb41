// Checks for the NCCL communicator's host code (communicators, peer links): a failed runtime call
// (CUDA_HOST_CHECK), driver call (CU_CHECK) or MPI call (MPI_CHECK) ends the process with the
// call, the place and the error.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "trident/core/error.hpp"
#include "trident/parallel/mpi_check.hpp"

#define CUDA_HOST_CHECK(stmt)                                                                     \
  do {                                                                                            \
    cudaError_t e_ = (stmt);                                                                      \
    if (e_ != cudaSuccess) ::trident::fatal(__FILE__, __LINE__, #stmt, cudaGetErrorString(e_));   \
  } while (0)

#define CU_CHECK(stmt)                                                                            \
  do {                                                                                            \
    CUresult r_ = (stmt);                                                                         \
    if (r_ != CUDA_SUCCESS)                                                                       \
      ::trident::fatal(__FILE__, __LINE__, #stmt, ::trident::str("CUresult ", static_cast<int>(r_))); \
  } while (0)
