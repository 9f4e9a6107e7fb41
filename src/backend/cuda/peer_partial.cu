// release_after (peer_partial.cuh): a partial's release as a one-thread kernel on the stream; and
// sum_partials, the other ranks' partials of a fused row sum added up in one pass.
#include "peer_partial.cuh"

#include <algorithm>

namespace trident::gpu {
namespace {

__global__ void release_kernel(uint64_t* flag, uint64_t value) { store_flag(flag, value); }

// Elements [0, n_vec) in 16-byte pieces, the rest one by one; each element read and written by
// the same thread (out may be part[0]). kCount is the number of partials, so that a piece's
// loads are all issued before the first add (a loop over a count known only at run time waited
// for each load in turn: 32 us for three 12.6 MB partials on H200, three times their traffic).
template <int kCount>
__global__ void sum_partials_kernel(bf16* out, Partials parts, size_t n, size_t n_vec) {
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t v = first * kVec; v < n_vec; v += step * kVec) {
    Raw8 raw[kCount];
#pragma unroll
    for (int j = 0; j < kCount; ++j) raw[j].load(parts.part[j] + v);
#pragma unroll
    for (int j = 1; j < kCount; ++j) raw[0].add_rounded(raw[j]);
    raw[0].store(out + v);
  }
  for (size_t i = n_vec + first; i < n; i += step) {
    float x[1];
    load_vec(x, parts.part[0] + i);
#pragma unroll
    for (int j = 1; j < kCount; ++j) add_rounded(x, parts.part[j] + i);
    store_vec(out + i, x);
  }
}

using SumPartialsKernel = void (*)(bf16*, Partials, size_t, size_t);

SumPartialsKernel sum_partials_kernel_for(int count) {
  static_assert(PeerOps::kMaxPartials == 8, "one case per count");
  switch (count) {
    case 1: return sum_partials_kernel<1>;
    case 2: return sum_partials_kernel<2>;
    case 3: return sum_partials_kernel<3>;
    case 4: return sum_partials_kernel<4>;
    case 5: return sum_partials_kernel<5>;
    case 6: return sum_partials_kernel<6>;
    case 7: return sum_partials_kernel<7>;
    case 8: return sum_partials_kernel<8>;
    default: TRIDENT_FATAL(str("sum_partials: ", count, " partials (1 to ", PeerOps::kMaxPartials, ")"));
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
  sum_partials_kernel_for(parts.count)<<<grid_for(work, kThreads, 65536), kThreads, 0, stream>>>(out, parts, n,
                                                                                                 n_vec);
  CUDA_CHECK_LAUNCH("sum_partials_kernel");
}

void release_after(const PeerRelease& release, cudaStream_t stream) {
  release_kernel<<<1, 1, 0, stream>>>(release.flag, release.value);
  CUDA_CHECK_LAUNCH("release_kernel");
}

}  // namespace trident::gpu
