// release_after (peer_partial.cuh): a partial's release as a one-thread kernel on the stream.
#include "peer_partial.cuh"

namespace trident::gpu {
namespace {

__global__ void release_kernel(uint64_t* flag, uint64_t value) { store_flag(flag, value); }

}  // namespace

void release_after(const PeerRelease& release, cudaStream_t stream) {
  release_kernel<<<1, 1, 0, stream>>>(release.flag, release.value);
  CUDA_CHECK_LAUNCH("release_kernel");
}

}  // namespace trident::gpu
