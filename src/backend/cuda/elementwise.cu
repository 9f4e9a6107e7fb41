// Elementwise kernels: fp32 math on each element, one rounding to the output type, 16-byte
// loads and stores where the addresses allow. Outputs may alias inputs (each element is read
// before it is written, by the same thread).
#include <algorithm>

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

// out = op(a, b) elementwise (b is ignored by unary ops and may be null). Elements [0, n_vec)
// go in 16-byte pieces (see vector_prefix), the tail and misaligned tensors one by one; each
// element is read and written by the same thread, so out may alias an input.
template <bool kBinary, class Out, class In, class Op>
__global__ void map_kernel(Out* out, const In* a, const In* b, size_t n, size_t n_vec, Op op) {
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t v = first; v < n_vec / kVec; v += step) {
    float x[kVec], y[kVec] = {};
    load_vec(x, a + v * kVec);
    if constexpr (kBinary) load_vec(y, b + v * kVec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) x[k] = op(x[k], y[k]);
    store_vec(out + v * kVec, x);
  }
  for (size_t i = n_vec + first; i < n; i += step) {
    float x[1], y[1] = {};
    load_vec(x, a + i);
    if constexpr (kBinary) load_vec(y, b + i);
    x[0] = op(x[0], y[0]);
    store_vec(out + i, x);
  }
}

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct GeluOp {
  __device__ float operator()(float x, float) const { return gelu_tanh(x); }
};
struct GeluGradOp {  // a = dout, b = pre
  __device__ float operator()(float dout, float pre) const { return dout * gelu_tanh_grad(pre); }
};
struct ScaleOp {
  float s;
  __device__ float operator()(float x, float) const { return x * s; }
};
struct ConvertOp {  // the store rounds (to bf16) or keeps (to fp32)
  __device__ float operator()(float x, float) const { return x; }
};

template <bool kBinary, class Out, class In, class Op>
void launch_map(Out* out, const In* a, const In* b, size_t n, Op op, const char* name, cudaStream_t stream) {
  if (n == 0) return;
  const size_t n_vec = vector_prefix(n, out, a, b);
  const size_t work = std::max(n_vec / kVec, n - n_vec);  // iterations of the longer loop
  map_kernel<kBinary><<<grid_for(work, kThreads, 65536), kThreads, 0, stream>>>(out, a, b, n, n_vec, op);
  CUDA_CHECK_LAUNCH(name);
}

}  // namespace

void add(bf16* out, const bf16* a, const bf16* b, size_t n, cudaStream_t stream) {
  launch_map<true>(out, a, b, n, AddOp{}, "map_kernel(add)", stream);
}

void gelu_fwd(bf16* out, const bf16* in, size_t n, cudaStream_t stream) {
  launch_map<false>(out, in, static_cast<const bf16*>(nullptr), n, GeluOp{}, "map_kernel(gelu_fwd)", stream);
}

void gelu_bwd(bf16* din, const bf16* dout, const bf16* pre, size_t n, cudaStream_t stream) {
  launch_map<true>(din, dout, pre, n, GeluGradOp{}, "map_kernel(gelu_bwd)", stream);
}

void scale(float* x, float s, size_t n, cudaStream_t stream) {
  launch_map<false>(x, x, static_cast<const float*>(nullptr), n, ScaleOp{s}, "map_kernel(scale)", stream);
}

void accumulate(float* acc, const float* x, size_t n, cudaStream_t stream) {
  launch_map<true>(acc, acc, x, n, AddOp{}, "map_kernel(accumulate)", stream);
}

void convert(bf16* dst, const float* src, size_t n, cudaStream_t stream) {
  launch_map<false>(dst, src, static_cast<const float*>(nullptr), n, ConvertOp{}, "map_kernel(to_bf16)", stream);
}

void convert(float* dst, const bf16* src, size_t n, cudaStream_t stream) {
  launch_map<false>(dst, src, static_cast<const bf16*>(nullptr), n, ConvertOp{}, "map_kernel(to_f32)", stream);
}

}  // namespace trident::gpu
