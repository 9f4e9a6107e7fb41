// parallel.auto: the planner's best layout for the launched ranks, chosen identically on every rank.
#pragma once

#include <mpi.h>

#include "trident/config/run_config.hpp"

namespace trident {

// With parallel.auto set, replaces tp, pp, dp, zero, schedule and train.micro_batch_size by the
// planner's fastest layout of the ranks of `world` that fits one rank's memory (the smallest GPU
// of any node; a fixed 8 GiB on the CPU backend) and logs the choice. Throws InputError when no
// layout fits. Collective over `world`; does nothing without parallel.auto.
void apply_auto_layout(RunConfig& cfg, MPI_Comm world);

}  // namespace trident
