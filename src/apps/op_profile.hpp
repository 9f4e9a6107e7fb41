// The per-op GPU time table of `trident bench --bench.profile` (training steps and decode steps).
#pragma once

#include <string>
#include <vector>

#include "trident/core/op_time.hpp"

namespace trident {

// The profiled steps' op times, per step, and how much of the step went to waiting on
// communicators ("wait ..." regions: the compute stream stalled on a collective or p2p).
struct StepProfile {
  std::vector<OpTime> ops;
  double step_ms = 0, op_ms = 0, wait_ms = 0;
};

// Backend::take_profile()'s sums over `steps` steps that took `total_ms` of host time, per step.
StepProfile step_profile(std::vector<OpTime> ops, int steps, double total_ms);

// The table, headed by what a step is ("training step", "decode step").
void print_profile(const StepProfile& p, int steps, const std::string& step = "step");

}  // namespace trident
