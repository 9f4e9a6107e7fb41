// MaskedLearnableSource: LearnableSource's tokens with fine-tuning style target masks, for the SFT
// loss tests (layouts against one rank, PyTorch reference).
#pragma once

#include "learnable_source.hpp"

namespace trident::test {

// Sample k trains targets [p, e) only (a prompt before, padding after) with p and e drawn per
// sample, so samples train different numbers of targets and a per-micro-batch or per-rank mean
// differs from the global batch's; every seventh sample trains none.
class MaskedLearnableSource : public LearnableSource {
 public:
  MaskedLearnableSource(int seq_len, int vocab, uint64_t seed) : LearnableSource(seq_len, vocab, seed), T_(seq_len),
                                                                  seed_(seed) {}
  bool masks_targets() const override { return true; }
  void target_mask(int64_t first, int count, uint8_t* out) override {
    for (int k = 0; k < count; ++k) {
      const uint64_t s = static_cast<uint64_t>(first + k);
      const int p = static_cast<int>(hash3(seed_ + 1, s, 0) % T_);
      const int e = s % 7 == 3 ? p : p + 1 + static_cast<int>(hash3(seed_ + 1, s, 1) % (T_ - p));
      for (int t = 0; t < T_; ++t) out[k * T_ + t] = t >= p && t < e;
    }
  }

 private:
  int T_;
  uint64_t seed_;
};

}  // namespace trident::test
