// Counter-based random numbers: a value is a pure function of (seed, stream, index), so every
// rank can generate exactly its own shard of a tensor and any layout sees the same weights.
#pragma once

#include <cmath>
#include <cstdint>

// The stateless functions below are also compiled for the GPU (CUDA sources include this header),
// so a draw on the device equals the host's.
#ifdef __CUDACC__
#define TRIDENT_HOST_DEVICE __host__ __device__
#else
#define TRIDENT_HOST_DEVICE
#endif

namespace trident {

TRIDENT_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

TRIDENT_HOST_DEVICE inline uint64_t hash3(uint64_t seed, uint64_t stream, uint64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ index);
}

// Uniform in (0, 1).
TRIDENT_HOST_DEVICE inline double uniform_at(uint64_t seed, uint64_t stream, uint64_t index) {
  return (static_cast<double>(hash3(seed, stream, index) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Gumbel noise -log(-log(u)) for token `token` of sequence `sequence` at `position`: the argmax of
// logit / temperature + noise over a vocabulary is a draw from softmax(logits / temperature), and
// it depends on these keys only, so every layout and batch split samples the same tokens.
TRIDENT_HOST_DEVICE inline float gumbel_at(uint64_t seed, uint64_t sequence, uint64_t position, uint64_t token) {
  const double u = uniform_at(hash3(seed, sequence, position), 0x67756d62656cull /* "gumbel" */, token);
  return static_cast<float>(-log(-log(u)));
}

// Standard normal (Box-Muller on two independent counters).
double normal_at(uint64_t seed, uint64_t stream, uint64_t index);

// Sequential generator for sampling (generation, shuffles): state is one counter.
class Rng {
 public:
  explicit Rng(uint64_t seed, uint64_t stream = 0) : seed_(seed), stream_(stream) {}
  double uniform() { return uniform_at(seed_, stream_, counter_++); }
  uint64_t next_u64() { return hash3(seed_, stream_, counter_++); }
  uint64_t counter() const { return counter_; }
  void set_counter(uint64_t c) { counter_ = c; }

 private:
  uint64_t seed_, stream_, counter_ = 0;
};

}  // namespace trident
