// Box-Muller normal from counter-based uniforms.
#include "trident/core/rng.hpp"

#include <cmath>

namespace trident {

double normal_at(uint64_t seed, uint64_t stream, uint64_t index) {
  double u1 = uniform_at(seed, stream, 2 * index);
  double u2 = uniform_at(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace trident
