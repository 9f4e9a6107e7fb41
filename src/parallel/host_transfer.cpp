// Checked point-to-point MPI on the world communicator (see host_transfer.hpp).
#include "trident/parallel/host_transfer.hpp"

#include <climits>

#include "trident/core/error.hpp"
#include "trident/parallel/mpi_check.hpp"

namespace trident {
namespace {

constexpr int kHostTransferTag = 0;

}  // namespace

void send_floats(const ParallelGroups& g, int to, const std::vector<float>& data) {
  MPI_CHECK(MPI_Send(data.data(), mpi_count(data.size(), "a host transfer"), MPI_FLOAT, to, kHostTransferTag,
                     g.mpi.world));
}

void recv_floats(const ParallelGroups& g, int from, std::vector<float>& data) {
  MPI_CHECK(MPI_Recv(data.data(), mpi_count(data.size(), "a host transfer"), MPI_FLOAT, from, kHostTransferTag,
                     g.mpi.world, MPI_STATUS_IGNORE));
}

}  // namespace trident
