// RandomTokens: uniformly random token ids, a pure function of (seed, sample, position). The
// data source of benchmarks, which must not depend on a dataset.
#pragma once

#include "trident/core/rng.hpp"
#include "trident/train/batch_source.hpp"

namespace trident {

class RandomTokens : public BatchSource {
 public:
  RandomTokens(int seq_len, int vocab_size, uint64_t seed) : T_(seq_len), V_(vocab_size), seed_(seed) {}
  void samples(int64_t first, int count, int32_t* out) override {
    for (int k = 0; k < count; ++k)
      for (int i = 0; i <= T_; ++i)
        out[k * (T_ + 1) + i] = static_cast<int32_t>(hash3(seed_, static_cast<uint64_t>(first + k), i) % V_);
  }

 private:
  int T_, V_;
  uint64_t seed_;
};

}  // namespace trident
