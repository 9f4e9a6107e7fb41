// Gathers this layout's parameter shards into full logical tensors on world rank 0 (for tests,
// exports and comparisons between layouts), checking that replicas agree.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "trident/model/gpt.hpp"

namespace trident {

struct GatheredParams {
  std::map<std::string, std::vector<float>> tensors;   // name -> global tensor (fp32), on rank 0
  double max_replica_diff = 0;   // largest difference between copies held by several ranks
};

// Collective over the world communicator of g: the parameters, or any buffer laid out like them
// (the gradients).
GatheredParams gather_params(const GptStage& model, const ParallelGroups& g);
GatheredParams gather_like_params(const GptStage& model, TensorView flat, const ParallelGroups& g);

}  // namespace trident
