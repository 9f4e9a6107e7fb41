// Generator: autoregressive decoding with a KV cache on a single-stage layout (pp = 1, any tp),
// reusing the model's weights and block forward; only attention reads the cache.
#pragma once

#include <cstdint>
#include <vector>

#include "trident/core/rng.hpp"
#include "trident/model/gpt.hpp"

namespace trident {

struct SamplingParams {
  double temperature = 1.0;   // 0: greedy (argmax), deterministic
  int top_k = 0;              // keep the k most likely tokens; 0 = all
  double top_p = 1.0;         // keep the smallest set whose probability reaches p; 1 = all
};

// Picks the next token from full-vocabulary logits; ties in greedy mode go to the lowest id.
int32_t sample_token(const std::vector<float>& logits, const SamplingParams& p, Rng& rng);

class Generator {
 public:
  // Cache for max_len positions (at most model.n_positions) of one sequence.
  Generator(GptStage& model, int max_len);
  ~Generator();

  // Appends tokens at the current position and returns the full-vocabulary logits (V) of the
  // last one, identical on every rank of the TP group.
  std::vector<float> feed(const std::vector<int32_t>& tokens);
  int position() const { return pos_; }
  int max_len() const { return max_len_; }
  void reset() { pos_ = 0; }

 private:
  GptStage& model_;
  int max_len_, pos_ = 0;
  Buffer cache_buf_, act_buf_;
  std::vector<TensorView> k_cache_, v_cache_;   // per layer (1, NH/tp, max_len, HS)
  BlockActs acts_;                              // (max_len rows), shared by the layers
  TensorView x_, tokens_;                       // (max_len, C), (max_len) int32
};

}  // namespace trident
