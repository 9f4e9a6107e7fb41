// Configuration of commands that run a saved model (generate, eval): the model comes from the
// checkpoint's stored configuration, everything else from this command line.
#pragma once

#include <string>

#include "trident/config/run_config.hpp"
#include "trident/io/checkpoint.hpp"

namespace trident {

// Collective: reads the checkpoint's attributes (InputError on every rank for a bad file) and
// returns the command-line configuration with the checkpoint's [model] section.
RunConfig config_for_checkpoint(const std::string& file, const RunConfig& cli, CheckpointInfo* info);

}  // namespace trident
