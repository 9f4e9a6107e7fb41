// Checkpoints through parallel HDF5: one file per checkpoint, holding every logical tensor at its
// global shape (fp32) under /model/<name> and /optim/{master,exp_avg,exp_avg_sq}/<name>, written
// collectively, each rank writing only the hyperslab it owns. Any valid layout loads any
// checkpoint: it just reads other hyperslabs. Format: docs/CHECKPOINTS.md.
#pragma once

#include <cstdint>
#include <string>

#include "trident/config/run_config.hpp"
#include "trident/model/gpt.hpp"
#include "trident/train/optimizer.hpp"

namespace trident {

constexpr int kCheckpointFormatVersion = 1;

struct CheckpointInfo {
  int format_version = kCheckpointFormatVersion;
  int64_t step = 0;               // optimizer steps completed
  int64_t consumed_samples = 0;   // global samples consumed (the data position)
  uint64_t seed = 0;              // train.seed: initialisation and data order are pure functions of it
  std::string config;             // the resolved configuration (INI)
  std::string layout;             // "dp=2 tp=2 pp=2 zero=1 schedule=1f1b"
};

struct SaveResult {
  std::string path;
  double bytes = 0, seconds = 0;
};

// Collective over g's world. Writes <dir>/step_<step>.h5.tmp, closes it, renames it, then points
// <dir>/latest at it and prunes all but the newest `keep` checkpoints. A crash at any moment
// leaves the previous checkpoint loadable. Environment failures (disk full) are fatal.
SaveResult save_checkpoint(const std::string& dir, int keep, const CheckpointInfo& info, const GptStage& model,
                           const Optimizer& opt, const ParallelGroups& g);

// Collective: loads this layout's parameters and, when opt is given, its optimizer state.
// Throws InputError on every rank, naming the file and the problem, for a file that is
// missing, truncated, corrupt (checksum), from a newer format, or of another model shape;
// nothing is written.
CheckpointInfo load_checkpoint(const std::string& file, GptStage& model, Optimizer* opt, const ParallelGroups& g);

// The attributes only (step, config, layout...), read by one process.
CheckpointInfo read_checkpoint_info(const std::string& file);

// The file checkpoint.resume designates: "" to start fresh (none, or auto without a checkpoint).
// Throws InputError for a path that does not exist.
std::string resolve_resume(const CheckpointConfig& c);

// Checks (on every rank, before training) that checkpoint.dir exists or can be created and is
// writable. Throws InputError naming the directory.
void prepare_checkpoint_dir(const std::string& dir);

// `trident inspect`: step, config, layout, and each tensor's shape and L2 norm (serial read).
std::string describe_checkpoint(const std::string& file);

}  // namespace trident
