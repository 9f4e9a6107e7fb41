// StepTimer: per-step wall time from when a step can start to when its results are complete.
#include "trident/train/step_timer.hpp"

#include <algorithm>

namespace trident {

double StepTimer::step_ms(Clock::time_point queued, Clock::time_point done) {
  const Clock::time_point start = std::max(queued, last_done_);
  last_done_ = done;
  return std::chrono::duration<double, std::milli>(done - start).count();
}

}  // namespace trident
