// The host AdamW of parallel.offload_optimizer (ZeRO-Offload): fp32 master weights, moments and
// gradients in host memory, updated by OpenMP threads with vectorised loops, bit for bit as the
// CPU backend's adamw op (the same adamw_element).
#pragma once

#include <cstddef>
#include <vector>

#include "trident/backend/backend.hpp"

namespace trident {

// n elements at `offset` of the host arrays; weight decay applies where decay is set.
struct AdamWRange {
  size_t offset, n;
  bool decay;
};

// AdamW over `ranges` of master, m, v (fp32) from grad (fp32, already summed over DP), writing
// each updated master weight converted to out_dtype (F32 or BF16) at the same offset of out.
// a.grad_scale holds the clipping factor (clip_factor). Runs `threads` OpenMP threads (0: the
// OpenMP default) over fixed chunks; each element is independent of the others, so the result
// does not depend on the thread count.
void host_adamw(const std::vector<AdamWRange>& ranges, float* master, float* m, float* v, const float* grad, void* out,
                DType out_dtype, const AdamWArgs& a, int threads = 0);

}  // namespace trident
