// Elementwise kernels: fp32 math on each element, one rounding to the output type. Outputs may
// alias inputs (each element is read before it is written, by the same thread).
#include "elementwise.cuh"

namespace trident::gpu {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

__device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float t = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

// Grid-stride loop shared by every kernel of this file.
#define FOR_EACH_ELEMENT(i, n)                                                         \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

__global__ void add_kernel(bf16* out, const bf16* a, const bf16* b, size_t n) {
  FOR_EACH_ELEMENT(i, n) out[i] = to_bf16(to_float(a[i]) + to_float(b[i]));
}

__global__ void gelu_fwd_kernel(bf16* out, const bf16* in, size_t n) {
  FOR_EACH_ELEMENT(i, n) out[i] = to_bf16(gelu_tanh(to_float(in[i])));
}

__global__ void gelu_bwd_kernel(bf16* din, const bf16* dout, const bf16* pre, size_t n) {
  FOR_EACH_ELEMENT(i, n) din[i] = to_bf16(to_float(dout[i]) * gelu_tanh_grad(to_float(pre[i])));
}

__global__ void scale_kernel(float* x, float s, size_t n) { FOR_EACH_ELEMENT(i, n) x[i] *= s; }

__global__ void to_bf16_kernel(bf16* dst, const float* src, size_t n) {
  FOR_EACH_ELEMENT(i, n) dst[i] = to_bf16(src[i]);
}

__global__ void to_f32_kernel(float* dst, const bf16* src, size_t n) {
  FOR_EACH_ELEMENT(i, n) dst[i] = to_float(src[i]);
}

#undef FOR_EACH_ELEMENT

int blocks_for(size_t n) { return grid_for(n, kThreads, 65536); }

}  // namespace

void add(bf16* out, const bf16* a, const bf16* b, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, a, b, n);
  CUDA_CHECK_LAUNCH("add_kernel");
}

void gelu_fwd(bf16* out, const bf16* in, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  gelu_fwd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, in, n);
  CUDA_CHECK_LAUNCH("gelu_fwd_kernel");
}

void gelu_bwd(bf16* din, const bf16* dout, const bf16* pre, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  gelu_bwd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(din, dout, pre, n);
  CUDA_CHECK_LAUNCH("gelu_bwd_kernel");
}

void scale(float* x, float s, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, s, n);
  CUDA_CHECK_LAUNCH("scale_kernel");
}

void convert(bf16* dst, const float* src, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n);
  CUDA_CHECK_LAUNCH("to_bf16_kernel");
}

void convert(float* dst, const bf16* src, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_f32_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n);
  CUDA_CHECK_LAUNCH("to_f32_kernel");
}

}  // namespace trident::gpu
