// AdamW in one pass: read grad, master and both moments once, write them (and the bf16
// parameter copy) once, in 16-byte accesses where the addresses allow.
#include <algorithm>
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

// One element of the update; m, v and master are updated in place.
__device__ __forceinline__ float adamw_update(float g, float& m, float& v, float& w, const AdamWStep& s) {
  g *= s.grad_scale;
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  const float denom = sqrtf(v) / s.sqrt_bc2 + s.eps;
  w = w * s.decay - s.step_size * (m / denom);
  return w;
}

// Elements [0, n_vec) in pieces of kVec (16-byte accesses), the rest one by one; this thread
// takes pieces and elements first, first + stride, ...
__device__ __forceinline__ void adamw_range(bf16* param, float* master, float* m, float* v, const float* grad,
                                            size_t n, size_t n_vec, size_t first, size_t stride, const AdamWStep& s) {
  for (size_t p = first; p < n_vec / kVec; p += stride) {
    const size_t i = p * kVec;
    float g[kVec], mi[kVec], vi[kVec], w[kVec];
    load_vec(g, grad + i);
    load_vec(mi, m + i);
    load_vec(vi, v + i);
    load_vec(w, master + i);
#pragma unroll
    for (int k = 0; k < kVec; ++k) adamw_update(g[k], mi[k], vi[k], w[k], s);
    store_vec(m + i, mi);
    store_vec(v + i, vi);
    store_vec(master + i, w);
    if (param) store_vec(param + i, w);
  }
  for (size_t i = n_vec + first; i < n; i += stride) {
    const float w = adamw_update(grad[i], m[i], v[i], master[i], s);
    if (param) param[i] = to_bf16(w);
  }
}

__global__ void adamw_kernel(bf16* param, float* master, float* m, float* v, const float* grad, size_t n, size_t n_vec,
                             AdamWStep s) {
  adamw_range(param, master, m, v, grad, n, n_vec, blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x,
              static_cast<size_t>(gridDim.x) * blockDim.x, s);
}

// One block per piece; the piece's own alignment picks 16-byte or scalar accesses. The clipping
// factor is computed from the device-side squared norm by every thread.
__global__ void adamw_multi_kernel(bf16* param, float* master, float* m, float* v, const float* grad,
                                   const MultiTensorEntry* pieces, AdamWStep s, float lr_x_decay, const float* norm_sq,
                                   float clip) {
  const MultiTensorEntry piece = pieces[blockIdx.x];
  if (norm_sq && clip > 0) s.grad_scale *= fminf(1.0f, clip / (sqrtf(*norm_sq) + 1e-6f));
  s.decay = piece.decay ? 1.0f - lr_x_decay : 1.0f;
  bf16* p = param ? param + piece.flat : nullptr;
  const float* g = grad + piece.flat;
  float *w = master + piece.state, *m1 = m + piece.state, *m2 = v + piece.state;
  const size_t n = static_cast<size_t>(piece.n);
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  const size_t n_vec =
      aligned(p) && aligned(g) && aligned(w) && aligned(m1) && aligned(m2) ? n / kVec * kVec : 0;
  adamw_range(p, w, m1, m2, g, n, n_vec, threadIdx.x, blockDim.x, s);
}

AdamWStep step_constants(const AdamWArgs& a) {
  TRIDENT_CHECK(
      a.bias_correction1 > 0 && a.bias_correction2 > 0,
      str("adamw: bias corrections must be positive (got ", a.bias_correction1, ", ", a.bias_correction2, ")"));
  AdamWStep s{a.beta1, a.beta2, a.eps, a.grad_scale};
  s.decay = 1.0f - a.lr * a.weight_decay;
  s.step_size = a.lr / a.bias_correction1;
  s.sqrt_bc2 = std::sqrt(a.bias_correction2);
  return s;
}

}  // namespace

void adamw(bf16* param, float* master, float* m, float* v, const float* grad, size_t n, const AdamWArgs& a,
           cudaStream_t stream) {
  if (n == 0) return;
  const AdamWStep s = step_constants(a);
  const size_t n_vec = vector_prefix(n, param, master, m, v, grad);
  const size_t work = std::max(n_vec / kVec, n - n_vec);  // iterations of the longer loop
  adamw_kernel<<<grid_for(work, kThreads, 65536), kThreads, 0, stream>>>(param, master, m, v, grad, n, n_vec, s);
  CUDA_CHECK_LAUNCH("adamw_kernel");
}

void adamw_multi(bf16* param, float* master, float* m, float* v, const float* grad, const MultiTensorEntry* pieces,
                 int count, const AdamWArgs& a, const float* norm_sq, float clip, cudaStream_t stream) {
  if (count == 0) return;
  adamw_multi_kernel<<<count, kThreads, 0, stream>>>(param, master, m, v, grad, pieces, step_constants(a),
                                                     a.lr * a.weight_decay, norm_sq, clip);
  CUDA_CHECK_LAUNCH("adamw_multi_kernel");
}

}  // namespace trident::gpu
