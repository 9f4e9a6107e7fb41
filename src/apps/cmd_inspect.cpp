// `trident inspect CHECKPOINT`: step, configuration, saved layout, tensors with shapes and norms.
#include <mpi.h>

#include "commands.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/checkpoint.hpp"

namespace trident {

int cmd_inspect(const Args& args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    log_info("usage: trident inspect CHECKPOINT.h5\n  prints step, configuration, the layout it was saved with, and every "
             "tensor's shape and L2 norm");
    return 0;
  }
  if (args.size() != 1) throw InputError("usage: trident inspect CHECKPOINT.h5");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) log_info(describe_checkpoint(args[0]));
  return 0;
}

}  // namespace trident
