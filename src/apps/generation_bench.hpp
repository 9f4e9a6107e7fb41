// `trident bench --bench.generate`: batched generation on the training layout (pp = 1, any tp, each
// data-parallel replica its share of the prompts) timed against a plain forward of the same tokens.
#pragma once

#include <string>

#include "trident/config/run_config.hpp"

namespace trident {

struct GenerationBenchOptions {
  std::string batches = "1,8,64,256";   // prompts over all data-parallel replicas, one table row each
  int prompt_len = 128, new_tokens = 128;
  double temperature = 0;   // 0: greedy; either way sampled on the device
  int max_rows = 0;         // the Generator's tokens per feed; 0: its default (slots + max_len)
  bool profile = false;     // bench.profile: also the GPU time per op of a decode step, per batch size
};

// Runs the benchmark on MPI_COMM_WORLD with cfg's model and layout and prints its table on rank 0.
// Bad options and layouts are InputErrors naming the option.
void generation_bench(RunConfig cfg, const GenerationBenchOptions& o);

}  // namespace trident
