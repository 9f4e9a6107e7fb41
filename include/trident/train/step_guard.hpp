// StepGuard: decides, from a step's loss and gradient norm (the same on every rank), whether its
// update is applied: a non-finite value, or with train.spike_zscore a loss spike, skips it.
#pragma once

#include <deque>
#include <string>

namespace trident {

class StepGuard {
 public:
  // spike_zscore 0: no spike detection. Otherwise a loss more than spike_zscore standard
  // deviations above the mean of the last kWindow applied steps (once kMinHistory are known)
  // is a spike.
  explicit StepGuard(double spike_zscore) : spike_zscore_(spike_zscore) {}
  static constexpr size_t kWindow = 100, kMinHistory = 20;

  // Empty when the update may be applied (and the loss joins the history); else why it is skipped.
  std::string check(double loss, double grad_norm);

 private:
  double spike_zscore_;
  std::deque<double> losses_;   // of the last applied steps, oldest first
};

}  // namespace trident
