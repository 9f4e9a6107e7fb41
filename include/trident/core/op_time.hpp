// OpTime: the GPU time of one op or named region summed over a profile (`trident bench
// --bench.profile`). In core so that the backends and the communicators can both report it.
#pragma once

#include <string>

namespace trident {

struct OpTime {
  std::string name;   // "matmul_fwd 32768x768x2304" (op and sizes), "wait dp reduce-scatter"
  long calls = 0;
  double ms = 0;
};

}  // namespace trident
