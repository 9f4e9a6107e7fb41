// Shared helpers for tests: random tensors, relative errors, a CPU backend instance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trident::test {

// Deterministic pseudo-random values in [-scale, scale).
std::vector<float> random_vector(size_t n, uint64_t seed, float scale = 1.0f);

// ||a - b|| / max(||b||, tiny), L2 over all elements.
double rel_l2(const std::vector<float>& a, const std::vector<float>& b);
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace trident::test
