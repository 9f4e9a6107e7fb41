// LearnableSource: token sequences with a pattern a model can learn, for tests whose losses must
// fall (PyTorch trace, generation, GPU layouts).
#pragma once

#include "trident/core/rng.hpp"
#include "trident/train/batch_source.hpp"

namespace trident::test {

// Each next token follows x -> (5x + 3) mod V with probability 0.8 and is random otherwise.
class LearnableSource : public BatchSource {
 public:
  LearnableSource(int seq_len, int vocab, uint64_t seed) : T_(seq_len), V_(vocab), seed_(seed) {}
  void samples(int64_t first, int count, int32_t* out) override {
    for (int k = 0; k < count; ++k) {
      int32_t* row = out + k * (T_ + 1);
      row[0] = static_cast<int32_t>(hash3(seed_, first + k, 0) % V_);
      for (int i = 1; i <= T_; ++i) {
        uint64_t h = hash3(seed_, first + k, i);
        row[i] = (h % 10) < 8 ? (5 * row[i - 1] + 3) % V_ : static_cast<int32_t>((h >> 8) % V_);
      }
    }
  }

 private:
  int T_, V_;
  uint64_t seed_;
};

}  // namespace trident::test
