// What one rank reads and writes of each checkpoint dataset: the logical tensors in a canonical
// order, the part of each this rank needs (its shard, its optimizer range) and the part it owns
// (writes once and checksums once: DP rank 0 or its ZeRO slice, TP rank 0 for replicated
// tensors, the first stage for the tied embedding).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trident/io/hyperslab.hpp"
#include "trident/model/gpt.hpp"
#include "trident/train/optimizer.hpp"

namespace trident {

enum class CkptKind { Model, Master, ExpAvg, ExpAvgSq };
constexpr CkptKind kCkptKinds[] = {CkptKind::Model, CkptKind::Master, CkptKind::ExpAvg, CkptKind::ExpAvgSq};
const char* ckpt_group(CkptKind k);   // "model", "optim/master", ...

// Local elements [lo, hi) of a parameter; `host` is the offset of element lo in the host buffer
// of its kind (flat parameters for the model, optimizer state for the others; under ZeRO-3 a save
// writes the model from the parameter shards, laid out as the optimizer state).
struct HostRange {
  const ParamInfo* param = nullptr;
  int64_t lo = 0, hi = 0;
  size_t host = 0;
};

struct LogicalTensor {
  std::string name;
  std::vector<int64_t> shape;
};

struct CheckpointPlan {
  // Where the model's groups are: "" for the run's model (/model, /optim/...), "value/" for task
  // ppo's value model (/value/model, /value/optim/...).
  std::string root;
  std::string group(CkptKind k) const { return root + ckpt_group(k); }
  std::vector<LogicalTensor> tensors;            // every logical tensor of the model
  std::map<std::string, HostRange> model_need, model_own, optim_need, optim_own;
};

// Without an optimizer the plan covers the model only.
CheckpointPlan make_checkpoint_plan(const GptStage& model, const Optimizer* opt, const ParallelGroups& g);
// The same from a rank's parameter layout alone (conversions, which build no model). With
// sharded_params (ZeRO-3's save, with an optimizer) each DP rank owns the model's elements of its
// update ranges, read from the parameter shards (Optimizer::updated_params); a load reads whole
// parameters and checks them as ZeRO-0 does (the plan without it).
CheckpointPlan make_checkpoint_plan(const ModelConfig& m, const ParamLayout& layout, const Optimizer* opt,
                                    const ParallelGroups& g, bool sharded_params = false);

// Order-independent checksum of the range's elements: the sum over elements of a hash of
// (global index, fp32 bits), so ranks of any layout add their owned parts.
uint64_t range_checksum(const HostRange& p, const float* host_base);

// Copies the range's non-padding elements between the host buffer and a packed buffer ordered
// like the file selection.
void pack_range(const HostRange& p, const ShardBoxes& sb, const float* host_base, std::vector<float>& packed);
void unpack_range(const HostRange& p, const ShardBoxes& sb, const std::vector<float>& packed, float* host_base);

// fsync of a file or directory (checkpoint_files.cpp); false (errno set) when it cannot be opened
// or synced. The save syncs its file and the directory, write_latest the directory.
bool fsync_path(const std::string& path);

}  // namespace trident
