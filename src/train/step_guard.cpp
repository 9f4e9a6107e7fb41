// StepGuard: non-finite and spiking steps are reported instead of applied.
#include "trident/train/step_guard.hpp"

#include <cmath>

#include "trident/core/error.hpp"

namespace trident {

std::string StepGuard::check(double loss, double grad_norm) {
  if (!std::isfinite(loss)) return str("non-finite loss (", loss, ")");
  if (!std::isfinite(grad_norm)) return str("non-finite gradient norm (", grad_norm, ")");
  if (spike_zscore_ > 0 && losses_.size() >= kMinHistory) {
    double mean = 0, var = 0;
    for (double l : losses_) mean += l;
    mean /= static_cast<double>(losses_.size());
    for (double l : losses_) var += (l - mean) * (l - mean);
    const double sd = std::sqrt(var / static_cast<double>(losses_.size() - 1));
    if (sd > 0 && (loss - mean) / sd > spike_zscore_)
      return str("loss spike: ", loss, " is ", (loss - mean) / sd, " standard deviations above the mean ", mean,
                 " of the last ", losses_.size(), " applied steps (train.spike_zscore = ", spike_zscore_, ")");
  }
  losses_.push_back(loss);
  if (losses_.size() > kWindow) losses_.pop_front();
  return "";
}

}  // namespace trident
