// Learning-rate schedules: linear warm-up, then cosine, linear, warm-up-stable-decay or constant.
#include "trident/train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

namespace trident {

namespace {

// Fraction of the way from `first` to `last` (0-based steps) that `step` is, in [0, 1].
double progress(int step, int first, int last) {
  return std::clamp(static_cast<double>(step - first) / std::max(1, last - first), 0.0, 1.0);
}

}  // namespace

int lr_decay_end(const TrainConfig& t) { return t.lr_decay_steps > 0 ? t.lr_decay_steps : t.steps; }

double lr_at(const TrainConfig& t, int step) {
  if (step < t.warmup_steps) return t.lr * (step + 1) / t.warmup_steps;
  const int last = lr_decay_end(t) - 1;   // 0-based step that reaches min_lr
  if (t.lr_schedule == "constant") return t.lr;
  if (t.lr_schedule == "linear") return t.lr - (t.lr - t.min_lr) * progress(step, t.warmup_steps, last);
  if (t.lr_schedule == "wsd") {
    const int decay = static_cast<int>(std::lround(t.lr_wsd_decay_fraction * lr_decay_end(t)));
    const int first = std::max(t.warmup_steps, last - decay);
    return t.lr - (t.lr - t.min_lr) * progress(step, first, last);
  }
  return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + std::cos(M_PI * progress(step, t.warmup_steps, last)));
}

}  // namespace trident
