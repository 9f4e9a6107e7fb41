// What the kernels that read the other TP rank's partial (parallel.tp_fused_sum: the LayerNorm and
// RMSNorm kernels) share: adding it rounded as the all-reduce would, and freeing it (PeerRelease).
#pragma once

#include "common.cuh"
#include "trident/backend/peer_ops.hpp"
#include "trident/peer/peer_release.hpp"

namespace trident::gpu {

// The other GPU's freed flag = value: a relaxed system-scope store (its reader is that GPU).
__device__ __forceinline__ void store_flag(uint64_t* flag, uint64_t value) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(flag), "l"(value) : "memory");
}

// PeerRelease: the kernel that reads the other TP rank's partial frees it from the block that
// finishes last. Every block counts itself in after a barrier (its reads of the partial are done
// then: each value read went into a store before it), and the last one resets the counter for
// the slot's next partial (read by a later kernel of the same stream) and writes the other GPU's
// freed flag, after a system-scope fence: the flag's reader is the other GPU, whose copy engine
// then overwrites the slot. Called by every thread of every block of the grid: a kernel that
// uses it must not return early (a block that never counts in would leave the counter wrong for
// the slot's next partial).
__device__ __forceinline__ void release_when_last(uint64_t* flag, uint64_t value, unsigned* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(counter, 1u) + 1 == gridDim.x) {
      *counter = 0;
      __threadfence_system();
      store_flag(flag, value);
    }
  }
}

// The same for a path whose kernels cannot write it: one thread, after the work queued before.
void release_after(const PeerRelease& release, cudaStream_t stream);

// The other ranks' partials of a fused row sum beyond tp = 2 (PeerOps::sum_partials).
struct Partials {
  const bf16* part[PeerOps::kMaxPartials] = {};
  int count = 0;
};
// out = (part[0] + part[1]) + part[2] ..., each add rounded to bf16, n elements (out may be part[0]).
void sum_partials(bf16* out, const Partials& parts, size_t n, cudaStream_t stream);

// v += the kWidth values at src, each sum rounded to bf16 (as a bf16 add leaves it).
template <int kWidth>
__device__ __forceinline__ void add_rounded(float (&v)[kWidth], const bf16* src) {
  float r[kWidth];
  load_vec(r, src);
#pragma unroll
  for (int k = 0; k < kWidth; ++k) v[k] = to_float(to_bf16(v[k] + r[k]));
}

}  // namespace trident::gpu
