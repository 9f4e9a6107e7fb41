// Fault points: the places where tests make a rank stall or die, to check that the job aborts
// cleanly or that the previous checkpoint survives. A release binary installs no handler, so each
// point does nothing; only the trident_test binary (CMake option TRIDENT_TEST_HOOKS, see
// tests/support/fault_injection.cpp) installs one, driven by TRIDENT_TEST_* variables.
#pragma once

#include <cstdint>

namespace trident {

enum class FaultPoint {
  TrainStep,         // a rank is about to run optimizer step `step`
  CheckpointWrite,   // a rank is halfway through writing the step-`step` checkpoint
  GradientsReduced,  // a rank holds update `step`'s reduced gradients: true spoils them (NaN)
};

// Returns whether the point's fault applies where the caller acts on it (GradientsReduced).
using FaultHandler = bool (*)(FaultPoint point, int world_rank, int64_t step);

// Installs the handler every fault point calls (nullptr: none, the default).
void set_fault_handler(FaultHandler handler);

// Calls the installed handler, if any; false without one.
bool fault_point(FaultPoint point, int world_rank, int64_t step);

}  // namespace trident
