// Learning rate: linear warm-up from 0 to lr over warmup_steps, then train.lr_schedule: cosine or
// linear decay to min_lr at update lr_decay_end(), wsd (stable at lr, then a linear decay to min_lr
// over the last lr_wsd_decay_fraction of it), or constant; min_lr after the decay.
#pragma once

#include "trident/config/run_config.hpp"

namespace trident {

double lr_at(const TrainConfig& t, int step);   // step is 0-based
// The update (1-based) at which the decay reaches min_lr: lr_decay_steps, or train.steps if 0.
int lr_decay_end(const TrainConfig& t);

}  // namespace trident
