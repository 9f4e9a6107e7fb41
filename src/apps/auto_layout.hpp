// parallel.auto: the planner's best layout for the launched ranks, chosen identically on every rank;
// the memory check of any layout before a command allocates it.
#pragma once

#include <mpi.h>

#include "trident/config/run_config.hpp"
#include "trident/train/planner.hpp"

namespace trident {

// With parallel.auto set, replaces tp, pp, dp, zero, schedule and train.micro_batch_size by the
// planner's fastest layout of the ranks of `world` that fits one rank's memory (the smallest GPU
// of any node; a fixed 8 GiB on the CPU backend) and logs the choice. Throws InputError when no
// layout fits. Collective over `world`; does nothing without parallel.auto.
void apply_auto_layout(RunConfig& cfg, MPI_Comm world);

// The planner's memory estimate of one training rank of the validated cfg on the backend it
// resolves to: bf16 with the CUDA context, cuBLASLt workspace and NCCL buffers on GPUs, fp32 and
// none of them on CPU ranks (Hardware's defaults otherwise).
MemoryEstimate planned_memory(const RunConfig& cfg);

// Throws InputError (on every rank) when the planner's memory estimate of the validated cfg
// exceeds what one rank has: the smallest GPU's memory on the CUDA backend, the node's available
// host memory divided by its ranks on the CPU backend; without `training`, of a forward-only run
// (eval, generate). Collective over `world`.
void check_memory_fits(const RunConfig& cfg, MPI_Comm world, bool training);

}  // namespace trident
