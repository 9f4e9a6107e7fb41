// SwiGLU kernels: a grid-stride loop over pieces of kWidth adjacent (gate, up) pairs of a row,
// fp32 math and one rounding per output; 16-byte accesses when F % 8 == 0 and the tensors are
// aligned (then no piece crosses a row), else one pair at a time.
#include "swiglu.cuh"

namespace trident::gpu {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <int kWidth>
__global__ void swiglu_fwd_kernel(bf16* out, const bf16* in, int F, size_t pieces) {
  for (size_t p = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; p < pieces;
       p += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t i = p * kWidth, n = i / F, j = i % F;   // first pair of the piece: row n, column j
    const bf16* gate = in + 2 * n * F + j;
    float g[kWidth], u[kWidth];
    load_vec(g, gate);
    load_vec(u, gate + F);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) g[k] = g[k] * sigmoid(g[k]) * u[k];
    store_vec(out + i, g);
  }
}

// Each thread reads its pairs before it writes their gradients: din may alias in.
template <int kWidth>
__global__ void swiglu_bwd_kernel(bf16* din, const bf16* dout, const bf16* in, int F, size_t pieces) {
  for (size_t p = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; p < pieces;
       p += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t i = p * kWidth, n = i / F, j = i % F;
    const size_t at = 2 * n * F + j;
    float g[kWidth], u[kWidth], d[kWidth], dgate[kWidth], dup[kWidth];
    load_vec(g, in + at);
    load_vec(u, in + at + F);
    load_vec(d, dout + i);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      const float s = sigmoid(g[k]);
      dgate[k] = d[k] * u[k] * s * (1.0f + g[k] * (1.0f - s));   // silu'(g) = s (1 + g (1 - s))
      dup[k] = d[k] * g[k] * s;
    }
    store_vec(din + at, dgate);
    store_vec(din + at + F, dup);
  }
}

}  // namespace

void swiglu_fwd(bf16* out, const bf16* in, int N, int F, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(N) * F;
  if (n == 0) return;
  const bool vec = F % kVec == 0 && aligned16(out, in);
  const size_t pieces = vec ? n / kVec : n;
  const auto kernel = vec ? swiglu_fwd_kernel<kVec> : swiglu_fwd_kernel<1>;
  kernel<<<grid_for(pieces, kThreads, 65536), kThreads, 0, stream>>>(out, in, F, pieces);
  CUDA_CHECK_LAUNCH("swiglu_fwd_kernel");
}

void swiglu_bwd(bf16* din, const bf16* dout, const bf16* in, int N, int F, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(N) * F;
  if (n == 0) return;
  const bool vec = F % kVec == 0 && aligned16(din, dout, in);
  const size_t pieces = vec ? n / kVec : n;
  const auto kernel = vec ? swiglu_bwd_kernel<kVec> : swiglu_bwd_kernel<1>;
  kernel<<<grid_for(pieces, kThreads, 65536), kThreads, 0, stream>>>(din, dout, in, F, pieces);
  CUDA_CHECK_LAUNCH("swiglu_bwd_kernel");
}

}  // namespace trident::gpu
