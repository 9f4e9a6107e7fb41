// release_after (peer_partial.cuh): a partial's release as a one-thread kernel on the stream; and
// sum_partials, the other ranks' partials of a fused row sum added up in one pass.
#include "peer_partial.cuh"

#include <algorithm>

namespace trident::gpu {
namespace {

__global__ void release_kernel(uint64_t* flag, uint64_t value) { store_flag(flag, value); }

// Elements [0, n_vec) in 16-byte pieces, the rest one by one; each element read and written by
// the same thread (out may be part[0]).
__global__ void sum_partials_kernel(bf16* out, Partials parts, size_t n, size_t n_vec) {
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t v = first * kVec; v < n_vec; v += step * kVec) {
    float x[kVec];
    load_vec(x, parts.part[0] + v);
    for (int j = 1; j < parts.count; ++j) add_rounded(x, parts.part[j] + v);
    store_vec(out + v, x);
  }
  for (size_t i = n_vec + first; i < n; i += step) {
    float x[1];
    load_vec(x, parts.part[0] + i);
    for (int j = 1; j < parts.count; ++j) add_rounded(x, parts.part[j] + i);
    store_vec(out + i, x);
  }
}

}  // namespace

void sum_partials(bf16* out, const Partials& parts, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  bool aligned = aligned16(out);
  for (int j = 0; j < parts.count; ++j) aligned = aligned && aligned16(parts.part[j]);
  const size_t n_vec = aligned ? n / kVec * kVec : 0;
  constexpr int kThreads = 256;
  const size_t work = std::max(n_vec / kVec, n - n_vec);
  sum_partials_kernel<<<grid_for(work, kThreads, 65536), kThreads, 0, stream>>>(out, parts, n, n_vec);
  CUDA_CHECK_LAUNCH("sum_partials_kernel");
}

void release_after(const PeerRelease& release, cudaStream_t stream) {
  release_kernel<<<1, 1, 0, stream>>>(release.flag, release.value);
  CUDA_CHECK_LAUNCH("release_kernel");
}

}  // namespace trident::gpu
