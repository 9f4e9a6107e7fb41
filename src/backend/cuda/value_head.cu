// Value head kernels: one warp per row for the values, one block for the loss sums (added in an
// order fixed by N, so they come out the same on every run), one thread per column for dw.
#include "value_head.cuh"

namespace trident::gpu {
namespace {

constexpr int kThreads = 1024;
constexpr int kRowsPerBlock = 8;   // warps of value_kernel's blocks

__global__ void value_kernel(float* values, const bf16* lnf, const bf16* w, int N, int C) {
  const int lane = threadIdx.x % 32, row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  if (row >= N) return;
  const bf16* x = lnf + static_cast<size_t>(row) * C;
  float acc = 0.0f;
  for (int c = lane; c < C; c += 32) acc += to_float(x[c]) * to_float(w[c]);
  acc = warp_sum(acc);
  if (lane == 0) values[row] = acc;
}

__global__ void value_loss_kernel(float* acc, float* dvalues, const float* values, const float* old_values,
                                  const float* returns, const float* coef, int N, ValueArgs a) {
  __shared__ float shared[32];
  float sums[3] = {0.0f, 0.0f, 0.0f};
  for (int t = threadIdx.x; t < N; t += blockDim.x) {
    const float c = coef[t];
    if (c == 0.0f) {
      if (dvalues) dvalues[t] = 0.0f;
      continue;
    }
    const float v = values[t], vo = old_values[t], R = returns[t];
    const float v_clip = vo + fminf(fmaxf(v - vo, -a.clip), a.clip);
    const float plain = (v - R) * (v - R), clipped = (v_clip - R) * (v_clip - R);
    const bool use_clipped = clipped > plain, inside = fabsf(v - vo) < a.clip;   // see CpuBackend::value_fwd
    sums[0] += c * 0.5f * fmaxf(plain, clipped);
    sums[1] += use_clipped ? 1.0f : 0.0f;
    sums[2] += c * plain;
    if (dvalues) dvalues[t] = a.scale * c * (use_clipped ? (inside ? v_clip - R : 0.0f) : v - R);
  }
  for (int k = 0; k < 3; ++k) {
    const float total = block_sum(sums[k], shared);
    if (threadIdx.x == 0) acc[k] += total;
  }
}

__global__ void value_dlnf_kernel(bf16* dlnf, const float* dvalues, const bf16* w, int N, int C) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(N) * C) return;
  dlnf[i] = to_bf16(dvalues[i / C] * to_float(w[i % C]));
}

// Each thread owns a column of dw and adds the rows in order.
__global__ void value_dw_kernel(float* dw, const float* dvalues, const bf16* lnf, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = 0.0f;
  for (int n = 0; n < N; ++n) acc += dvalues[n] * to_float(lnf[static_cast<size_t>(n) * C + c]);
  dw[c] += acc;
}

}  // namespace

void value_fwd(float* values, float* dvalues, float* acc, const bf16* lnf, const bf16* w, const float* old_values,
               const float* returns, const float* coef, int N, int C, const ValueArgs& a, cudaStream_t stream) {
  if (N == 0) return;
  value_kernel<<<(N + kRowsPerBlock - 1) / kRowsPerBlock, 32 * kRowsPerBlock, 0, stream>>>(values, lnf, w, N, C);
  CUDA_CHECK_LAUNCH("value_kernel");
  if (!coef) return;
  value_loss_kernel<<<1, kThreads, 0, stream>>>(acc, dvalues, values, old_values, returns, coef, N, a);
  CUDA_CHECK_LAUNCH("value_loss_kernel");
}

void value_bwd(bf16* dlnf, float* dw, const float* dvalues, const bf16* lnf, const bf16* w, int N, int C,
               cudaStream_t stream) {
  if (N == 0) return;
  const size_t n = static_cast<size_t>(N) * C;
  value_dlnf_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(dlnf, dvalues, w, N, C);
  CUDA_CHECK_LAUNCH("value_dlnf_kernel");
  value_dw_kernel<<<(C + 255) / 256, 256, 0, stream>>>(dw, dvalues, lnf, N, C);
  CUDA_CHECK_LAUNCH("value_dw_kernel");
}

}  // namespace trident::gpu
