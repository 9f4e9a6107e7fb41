// Sequence-level loss kernels: one block per sequence for the sums, one per row for the
// weighting, and a single block for the (few) pairs of a micro-batch (DPO's sigmoid or IPO loss).
#include "preference.cuh"

namespace trident::gpu {
namespace {

constexpr int kThreads = 256;

__global__ void segment_sum_kernel(float* out, const float* in, int len) {
  __shared__ float shared[32];
  const float* x = in + static_cast<size_t>(blockIdx.x) * len;
  float acc = 0.0f;
  for (int i = threadIdx.x; i < len; i += blockDim.x) acc += x[i];
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

__global__ void scale_rows_kernel(bf16* x, const float* w, int cols) {
  bf16* row = x + static_cast<size_t>(blockIdx.x) * cols;
  const float s = w[blockIdx.x];
  for (int j = threadIdx.x; j < cols; j += blockDim.x) row[j] = to_bf16(to_float(row[j]) * s);
}

__device__ __forceinline__ float log_sigmoid(float z) { return fminf(z, 0.0f) - log1pf(expf(-fabsf(z))); }
__device__ __forceinline__ float sigmoid(float z) {
  const float e = expf(-fabsf(z));
  return z >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

// Sequence s's trained targets, at least 1 (IPO's per-token log-ratios).
__device__ float trained_targets(const int32_t* targets, size_t s, int T) {
  int n = 0;
  for (int t = 0; t < T; ++t) n += targets[s * T + t] >= 0;
  return static_cast<float>(max(n, 1));
}

__global__ void dpo_loss_kernel(float* acc, float* row_weights, const float* pol, const float* ref,
                                const int32_t* targets, int pairs, int T, DpoArgs a) {
  __shared__ float shared[32];
  const float eps = a.label_smoothing;
  float sums[5] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    const float chosen = a.beta * (ref[2 * i] - pol[2 * i]);
    const float rejected = a.beta * (ref[2 * i + 1] - pol[2 * i + 1]);
    const float z = chosen - rejected;
    // d(scale * loss)/d(policy_nll) of the chosen sequence (wc) and the rejected one (wr).
    float wc, wr;
    if (a.loss == DpoLoss::Ipo) {
      const float nc = trained_targets(targets, 2 * static_cast<size_t>(i), T);
      const float nr = trained_targets(targets, 2 * static_cast<size_t>(i) + 1, T);
      const float d = (ref[2 * i] - pol[2 * i]) / nc - (ref[2 * i + 1] - pol[2 * i + 1]) / nr - 0.5f / a.beta;
      sums[0] += d * d;
      wc = a.scale * (-2.0f * d / nc);
      wr = a.scale * (2.0f * d / nr);
    } else {
      sums[0] += -(1.0f - eps) * log_sigmoid(z) - eps * log_sigmoid(-z);
      // dloss/dz, and dz/d(policy_nll) = -beta (chosen), +beta (rejected).
      const float dz = -(1.0f - eps) * sigmoid(-z) + eps * sigmoid(z);
      wc = -a.scale * a.beta * dz;
      wr = -wc;
    }
    sums[1] += z > 0 ? 1.0f : 0.0f;
    sums[2] += z;
    sums[3] += chosen;
    sums[4] += rejected;
    if (!row_weights) continue;
    float* w = row_weights + 2 * static_cast<size_t>(i) * T;
    for (int t = 0; t < T; ++t) {
      w[t] = wc;
      w[T + t] = wr;
    }
  }
  for (int k = 0; k < 5; ++k) {
    const float total = block_sum(sums[k], shared);
    if (threadIdx.x == 0) acc[k] += total;
  }
}

}  // namespace

void segment_sum(float* out, const float* in, int S, int len, cudaStream_t stream) {
  if (S == 0) return;
  segment_sum_kernel<<<S, kThreads, 0, stream>>>(out, in, len);
  CUDA_CHECK_LAUNCH("segment_sum_kernel");
}

void scale_rows(bf16* x, const float* w, int rows, int cols, cudaStream_t stream) {
  if (rows == 0) return;
  scale_rows_kernel<<<rows, kThreads, 0, stream>>>(x, w, cols);
  CUDA_CHECK_LAUNCH("scale_rows_kernel");
}

void dpo_loss(float* acc, float* row_weights, const float* policy_nll, const float* ref_nll, const int32_t* targets,
              int pairs, int T, const DpoArgs& a, cudaStream_t stream) {
  dpo_loss_kernel<<<1, kThreads, 0, stream>>>(acc, row_weights, policy_nll, ref_nll, targets, pairs, T, a);
  CUDA_CHECK_LAUNCH("dpo_loss_kernel");
}

}  // namespace trident::gpu
