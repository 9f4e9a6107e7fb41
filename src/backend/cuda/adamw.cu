// AdamW in one pass: read grad, master and both moments once, write them (and the bf16
// parameter copy) once.
#include <cmath>

#include "adamw.cuh"

namespace trident::gpu {
namespace {

constexpr int kThreads = 256;

// Per-step constants, computed once on the host.
struct AdamWStep {
  float beta1, beta2, eps, grad_scale;
  float decay;      // 1 - lr * weight_decay
  float step_size;  // lr / bias_correction1
  float sqrt_bc2;   // sqrt(bias_correction2)
};

__global__ void adamw_kernel(bf16* param, float* master, float* m, float* v, const float* grad, size_t n, AdamWStep s) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float g = grad[i] * s.grad_scale;
    const float mi = s.beta1 * m[i] + (1.0f - s.beta1) * g;
    const float vi = s.beta2 * v[i] + (1.0f - s.beta2) * g * g;
    const float denom = sqrtf(vi) / s.sqrt_bc2 + s.eps;
    const float w = master[i] * s.decay - s.step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
    master[i] = w;
    if (param) param[i] = to_bf16(w);
  }
}

}  // namespace

void adamw(bf16* param, float* master, float* m, float* v, const float* grad, size_t n, const AdamWArgs& a,
           cudaStream_t stream) {
  if (n == 0) return;
  TRIDENT_CHECK(
      a.bias_correction1 > 0 && a.bias_correction2 > 0,
      str("adamw: bias corrections must be positive (got ", a.bias_correction1, ", ", a.bias_correction2, ")"));
  AdamWStep s{a.beta1, a.beta2, a.eps, a.grad_scale};
  s.decay = 1.0f - a.lr * a.weight_decay;
  s.step_size = a.lr / a.bias_correction1;
  s.sqrt_bc2 = std::sqrt(a.bias_correction2);
  adamw_kernel<<<grid_for(n, kThreads, 65536), kThreads, 0, stream>>>(param, master, m, v, grad, n, s);
  CUDA_CHECK_LAUNCH("adamw_kernel");
}

}  // namespace trident::gpu
