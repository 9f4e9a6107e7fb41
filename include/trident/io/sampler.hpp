// SequenceSampler: the order in which fixed-length windows of the token stream are visited, a
// pure function of (seed, epoch, global sample index): resuming after N samples, with any DP
// size, continues exactly where training stopped.
#pragma once

#include <cstdint>

namespace trident {

class SequenceSampler {
 public:
  SequenceSampler(uint64_t n_windows, uint64_t seed);
  uint64_t n_windows() const { return n_; }
  uint64_t epoch_of(uint64_t sample) const { return sample / n_; }
  // The window visited by global sample `sample`: a permutation of [0, n) per epoch.
  uint64_t window(uint64_t sample) const;

 private:
  uint64_t permute(uint64_t x, uint64_t epoch) const;
  uint64_t n_, seed_;
  int half_bits_;
};

}  // namespace trident
