// Learning rate: linear warm-up from 0 to lr over warmup_steps, then cosine decay to min_lr at
// the last step.
#pragma once

#include "trident/config/run_config.hpp"

namespace trident {

double lr_at(const TrainConfig& t, int step);   // step is 0-based

}  // namespace trident
