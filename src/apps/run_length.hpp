// How long a run trains and how its learning rate decays, settled before the trainer is built:
// train.epochs or train.tokens as train.steps, and the decay length a resumed run keeps.
#pragma once

#include <cstdint>
#include <string>

#include "trident/config/run_config.hpp"

namespace trident {

// With train.epochs or train.tokens, sets train.steps from them (rounded up, in place of any
// train.steps given) and returns a line for the log saying so, the replaced value included;
// otherwise returns "". `train_sequences`: sequences in one epoch.
// Throws InputError when the steps exceed what a run can count.
std::string resolve_train_steps(TrainConfig& t, int seq_len, uint64_t train_sequences);

// A resumed run whose train.steps differs from its checkpoint's would stretch or squeeze the
// decay that follows train.steps (train.lr_decay_steps = 0), so the learning rate would jump:
// sets lr_decay_steps to the checkpoint's decay length and returns a note for the log ("" when
// nothing changes). `stored_ini` is the checkpoint's configuration, `origin` names it.
std::string keep_lr_decay(TrainConfig& now, const std::string& stored_ini, const std::string& origin);

}  // namespace trident
