// MPI_CHECK: an MPI call that fails ends the process with the call, the place and MPI's message.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <string>

#include "trident/core/error.hpp"

#define MPI_CHECK(call)                                                             \
  do {                                                                              \
    int mpi_rc_ = (call);                                                           \
    if (mpi_rc_ != MPI_SUCCESS) {                                                   \
      char mpi_msg_[MPI_MAX_ERROR_STRING];                                          \
      int mpi_len_ = 0;                                                             \
      MPI_Error_string(mpi_rc_, mpi_msg_, &mpi_len_);                               \
      ::trident::fatal(__FILE__, __LINE__, #call, std::string(mpi_msg_, mpi_len_)); \
    }                                                                               \
  } while (0)

namespace trident {

// n as MPI's int count; `what` names the message ("a host transfer") where n exceeds INT_MAX.
inline int mpi_count(size_t n, const char* what) {
  TRIDENT_CHECK(n <= static_cast<size_t>(INT_MAX), str(what, " of ", n, " elements exceeds INT_MAX"));
  return static_cast<int>(n);
}

}  // namespace trident
