// Warm-up + cosine learning-rate schedule.
#include "trident/train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

namespace trident {

double lr_at(const TrainConfig& t, int step) {
  if (step < t.warmup_steps) return t.lr * (step + 1) / t.warmup_steps;
  int decay_steps = std::max(1, t.steps - 1 - t.warmup_steps);
  double progress = std::min(1.0, static_cast<double>(step - t.warmup_steps) / decay_steps);
  return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace trident
