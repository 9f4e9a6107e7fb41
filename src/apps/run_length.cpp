// train.epochs / train.tokens to train.steps, and the learning-rate decay a resumed run keeps.
#include "run_length.hpp"

#include <cmath>
#include <limits>

#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/train/lr_schedule.hpp"

namespace trident {

std::string resolve_train_steps(TrainConfig& t, int seq_len, uint64_t train_sequences) {
  if (t.epochs <= 0 && t.tokens == 0) return "";
  const double per_step = t.epochs > 0 ? static_cast<double>(t.global_batch_size)
                                       : static_cast<double>(t.global_batch_size) * seq_len;
  const double wanted = t.epochs > 0 ? t.epochs * static_cast<double>(train_sequences) : static_cast<double>(t.tokens);
  const double steps = std::ceil(wanted / per_step);
  const char* option = t.epochs > 0 ? "train.epochs" : "train.tokens";
  if (steps > std::numeric_limits<int>::max())
    throw InputError(str(option, " = ", t.epochs > 0 ? str(t.epochs) : str(t.tokens), " needs ", steps,
                         " steps, more than a run can count; lower it or raise train.global_batch_size"));
  const int replaced = t.steps;
  t.steps = static_cast<int>(steps);
  return str(t.epochs > 0 ? str("train.epochs = ", t.epochs, " of ", train_sequences, " sequences: train.steps = ", t.steps)
                          : str("train.tokens = ", t.tokens, ": train.steps = ", t.steps, " of ",
                                t.global_batch_size * static_cast<uint64_t>(seq_len), " tokens"),
             " (in place of train.steps = ", replaced, ")");
}

std::string keep_lr_decay(TrainConfig& now, const std::string& stored_ini, const std::string& origin) {
  if (now.lr_decay_steps > 0) return "";
  RunConfig then;
  try {
    then = parse_config_text(stored_ini, origin);
  } catch (const InputError&) {
    return "";   // a stored configuration this version cannot read: nothing to keep
  }
  const int stored = lr_decay_end(then.train);
  if (stored == now.steps) return "";
  now.lr_decay_steps = stored;
  return str("note: train.steps = ", now.steps, " differs from the checkpoint's ", then.train.steps,
             "; the learning rate keeps decaying to train.min_lr at step ", stored,
             " as before (set train.lr_decay_steps to change it)");
}

}  // namespace trident
