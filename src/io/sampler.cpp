// A keyed Feistel network over the next power of four above n, with cycle walking, gives a
// different pseudo-random permutation of [0, n) for every (seed, epoch) in O(1) memory.
#include "trident/io/sampler.hpp"

#include "trident/core/error.hpp"
#include "trident/core/rng.hpp"

namespace trident {

SequenceSampler::SequenceSampler(uint64_t n_windows, uint64_t seed) : n_(n_windows), seed_(seed), half_bits_(1) {
  TRIDENT_CHECK(n_windows > 0, "sampler over zero windows");
  while ((uint64_t(1) << (2 * half_bits_)) < n_) ++half_bits_;
}

uint64_t SequenceSampler::permute(uint64_t x, uint64_t epoch) const {
  const uint64_t mask = (uint64_t(1) << half_bits_) - 1;
  uint64_t left = x >> half_bits_, right = x & mask;
  for (uint64_t round = 0; round < 4; ++round) {
    uint64_t f = hash3(seed_, epoch * 4 + round, right) & mask;
    uint64_t next = left ^ f;
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t SequenceSampler::window(uint64_t sample) const {
  uint64_t epoch = sample / n_, x = sample % n_;
  do x = permute(x, epoch);
  while (x >= n_);
  return x;
}

}  // namespace trident
