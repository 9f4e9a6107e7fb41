// Checkpoints through parallel HDF5: one file per checkpoint, holding every logical tensor at its
// global shape (fp32) under /model/<name> and /optim/{master,exp_avg,exp_avg_sq}/<name>, written
// collectively, each rank writing only the hyperslab it owns. Any valid layout loads any
// checkpoint: it just reads other hyperslabs. Format: docs/CHECKPOINTS.md.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "trident/config/run_config.hpp"
#include "trident/io/tokenizer_files.hpp"
#include "trident/model/gpt.hpp"
#include "trident/train/optimizer.hpp"

namespace trident {

constexpr int kCheckpointFormatVersion = 1;
// The group of task ppo's value model: /value/model/<name> and /value/optim/.../<name>.
constexpr const char* kValueGroup = "value";

struct CheckpointInfo {
  int format_version = kCheckpointFormatVersion;
  int64_t step = 0;               // optimizer steps completed
  int64_t consumed_samples = 0;   // global samples consumed (the data position)
  uint64_t seed = 0;              // train.seed: initialisation and data order are pure functions of it
  std::string config;             // the resolved configuration (INI)
  std::string layout;             // "dp=2 tp=2 pp=2 zero=1 schedule=1f1b"
  // The run's Hugging Face tokenizer (/tokenizer/<file>; empty: none known), which saves write.
  // read_checkpoint_info leaves it empty (it can be megabytes, and loads and resume planning need
  // none of it): read_checkpoint_tokenizer reads it.
  TokenizerFiles tokenizer;
  // Task ppo: the KL coefficient of the next step's rewards (attribute kl_coef; NaN: none stored).
  double kl_coef = std::nan("");
};

// Task ppo's value model and its optimizer, saved beside the policy in the same file.
struct ValueState {
  const GptStage* model = nullptr;
  const Optimizer* opt = nullptr;
};

struct SaveResult {
  std::string path;
  double bytes = 0, seconds = 0;
};

// Collective over g's world. Writes <c.dir>/step_<step>.h5.tmp (created exclusively: a link placed
// there is removed, never followed), closes it, renames it, then points <c.dir>/latest at it and
// prunes (prune_checkpoints). A crash at any moment leaves the previous checkpoint loadable.
// Environment failures (disk full) are fatal.
// With `value` given, task ppo's value model and its optimizer state go under /value as well.
SaveResult save_checkpoint(const CheckpointConfig& c, const CheckpointInfo& info, const GptStage& model,
                           const Optimizer& opt, const ParallelGroups& g, const ValueState& value = {});

// Collective over g's world: writes the parameters alone (the /model group, no optimizer state) of
// a model nobody trains here, as `trident convert` does: each rank its owned part of `params`
// (layout.total() fp32, this rank's shards), to PATH.tmp, renamed over PATH once complete (the
// caller decides whether PATH may be replaced). No `latest`, no pruning. Such a file starts runs
// (init.from), evaluates and generates; it cannot be resumed.
void save_weights_checkpoint(const std::string& path, const CheckpointInfo& info, const ModelConfig& m,
                             const ParamLayout& layout, const float* params, const ParallelGroups& g);

// Collective: loads this layout's parameters and, when opt is given, its optimizer state.
// Throws InputError on every rank, naming the file and the problem, for a file that is
// missing, not a regular file, truncated, corrupt (checksum), from a newer format, of another
// model shape, holding a dataset the model does not read (more layers), or with an impossible
// step or consumed_samples; nothing is written.
// With `value_model`, the model is task ppo's value model, read from the file's /value group (its
// absence is an InputError naming the file); otherwise /value is left unread.
CheckpointInfo load_checkpoint(const std::string& file, GptStage& model, Optimizer* opt, const ParallelGroups& g,
                               bool value_model = false);

// Collective: this rank's parameters as fp32 (layout().total() elements, zero between tensors)
// from the checkpoint's /model group, checked as load_checkpoint checks it; the model is not
// changed and the optimizer state is not read (a weights-only file is fine). For init.from.
// With `score_unread` given, a reward model (ModelConfig::score_head) also reads a language
// model's file: its transformer, not its LM head; score.weight is then left 0 and
// *score_unread set. A reward model's file never loads into a language model, nor (anywhere but
// here) a language model's into a reward model: InputError naming the file and --task reward.
CheckpointInfo read_checkpoint_params(const std::string& file, const GptStage& model, const ParallelGroups& g,
                                      std::vector<float>& params, bool* score_unread = nullptr);

// The attributes only (step, config, layout...), read by one process.
CheckpointInfo read_checkpoint_info(const std::string& file);
// The tokenizer files the checkpoint keeps (none for one saved without), read by one process; a
// declared size past the file's is refused (InputError) before anything is allocated.
TokenizerFiles read_checkpoint_tokenizer(const std::string& file);

struct ResumePlan {
  std::string file;   // the checkpoint to load; "" to start fresh
  int64_t step = 0;   // its step
  std::string note;   // why `file` when 'latest' did not name it (for rank 0 to print); else ""
};

// The file checkpoint.resume designates. auto: the newest checkpoint in checkpoint.dir, which is
// the one 'latest' names unless a save was interrupted between its rename and 'latest' (or
// 'latest' is missing or empty), in which case `note` says so; none: start fresh; else that file.
// Throws InputError for a path that is not a regular file, a 'latest' that does not hold a plain
// file name of the directory, and (unless checkpoint.overwrite) a checkpoint.dir holding
// checkpoints that this run did not resume from and would overwrite or prune: any, for a run
// that does not resume from that directory, else those later than its step.
ResumePlan resolve_resume(const CheckpointConfig& c);

// Checks (on every rank, before training) that checkpoint.dir exists or can be created and is
// writable. Throws InputError naming the directory.
void prepare_checkpoint_dir(const std::string& dir);

struct CheckpointFile {
  int64_t step = 0;
  std::string name;   // step_<step>.h5
};

// The complete checkpoints in dir (regular step_<n>.h5 files; not .tmp), newest first.
std::vector<CheckpointFile> list_checkpoints(const std::string& dir);

// Points <dir>/latest at the checkpoint `name`: latest.tmp is created exclusively (a stale file
// or link of that name is removed first, never followed), written, fsync'd and renamed over
// latest, which is then read back. Returns "" on success, else what failed; latest is then
// either the old pointer or the new one, never a partial file.
std::string write_latest(const std::string& dir, const std::string& name);

// Rank 0 after a save at step `written`: removes leftovers of interrupted saves, the checkpoints
// later than `written` when c.overwrite (another run's, which the user allowed to replace), and
// all but the newest c.keep of the rest. Never the file just written; a file that cannot be
// removed is a warning.
void prune_checkpoints(const CheckpointConfig& c, int64_t written);

// `trident inspect`: step, config, layout, and each tensor's shape and L2 norm (serial read).
std::string describe_checkpoint(const std::string& file);

}  // namespace trident
