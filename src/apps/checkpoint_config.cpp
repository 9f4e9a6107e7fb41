// Model settings from a checkpoint, the rest from the command line.
#include "checkpoint_config.hpp"

#include <mpi.h>

#include "trident/config/parse.hpp"
#include "trident/parallel/collective_error.hpp"

namespace trident {

RunConfig config_for_checkpoint(const std::string& file, const RunConfig& cli, CheckpointInfo* info) {
  RunConfig cfg = cli;
  collective_check(MPI_COMM_WORLD, [&] {
    *info = read_checkpoint_info(file);
    cfg.model = parse_config_text(info->config, file + " (stored config)").model;
  });
  return cfg;
}

}  // namespace trident
