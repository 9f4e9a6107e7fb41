// StepTimer: the wall time of each training step by itself, where steps are queued ahead of
// each other and evaluations or checkpoints fall between them.
#pragma once

#include <chrono>

namespace trident {

class StepTimer {
 public:
  using Clock = std::chrono::steady_clock;
  // Milliseconds of a step whose host work began at `queued` and whose results were complete at
  // `done`, counted from the later of `queued` and the previous step's `done`: a step queued
  // while the one before still ran starts when that one ends, and time spent between steps
  // (evaluation, checkpoints, the host idle) falls in no step. Steps are passed in order.
  double step_ms(Clock::time_point queued, Clock::time_point done);

 private:
  Clock::time_point last_done_{};
};

}  // namespace trident
