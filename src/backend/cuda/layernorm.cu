// LayerNorm kernels: one warp per row for the row-wise work; the dw/db column sums go through
// per-chunk partials added in a fixed order, so the backward pass is deterministic.
#include "layernorm.cuh"
#include "reduce.cuh"

namespace trident::gpu {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = 32 * kWarpsPerBlock;

__global__ void layernorm_fwd_kernel(bf16* out, float* mean, float* rstd, const bf16* in, const bf16* w, const bf16* b,
                                     int N, int C, float eps) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;  // whole warps leave together
  const bf16* x = in + static_cast<size_t>(row) * C;
  float s = 0.0f;
  for (int c = lane; c < C; c += 32) s += to_float(x[c]);
  const float m = warp_sum(s) / C;
  float v = 0.0f;  // second pass over the (cached) row: no cancellation for rows with a large mean
  for (int c = lane; c < C; c += 32) {
    const float d = to_float(x[c]) - m;
    v += d * d;
  }
  const float r = 1.0f / sqrtf(warp_sum(v) / C + eps);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
  bf16* o = out + static_cast<size_t>(row) * C;
  for (int c = lane; c < C; c += 32) o[c] = to_bf16((to_float(x[c]) - m) * r * to_float(w[c]) + to_float(b[c]));
}

// din += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = dout * w.
__global__ void layernorm_din_kernel(bf16* din_accum, const bf16* dout, const bf16* in, const bf16* w,
                                     const float* mean, const float* rstd, int N, int C) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const size_t off = static_cast<size_t>(row) * C;
  const float m = mean[row], r = rstd[row];
  float s_dnorm = 0.0f, s_dnorm_norm = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float dnorm = to_float(dout[off + c]) * to_float(w[c]);
    s_dnorm += dnorm;
    s_dnorm_norm += dnorm * ((to_float(in[off + c]) - m) * r);
  }
  const float mean_dnorm = warp_sum(s_dnorm) / C;
  const float mean_dnorm_norm = warp_sum(s_dnorm_norm) / C;
  for (int c = lane; c < C; c += 32) {
    const float norm = (to_float(in[off + c]) - m) * r;
    const float dnorm = to_float(dout[off + c]) * to_float(w[c]);
    const float g = r * (dnorm - mean_dnorm - norm * mean_dnorm_norm);
    din_accum[off + c] = to_bf16(to_float(din_accum[off + c]) + g);
  }
}

// Partial column sums of dout * norm and dout over the rows of one chunk (blockIdx.y).
__global__ void layernorm_dwdb_partials_kernel(float* partial_dw, float* partial_db, const bf16* dout, const bf16* in,
                                               const float* mean, const float* rstd, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int r0 = blockIdx.y * kRowsPerPartial, r1 = min(N, r0 + kRowsPerPartial);
  float sw = 0.0f, sb = 0.0f;
  for (int row = r0; row < r1; ++row) {
    const size_t i = static_cast<size_t>(row) * C + c;
    const float g = to_float(dout[i]);
    sw += g * ((to_float(in[i]) - mean[row]) * rstd[row]);
    sb += g;
  }
  partial_dw[static_cast<size_t>(blockIdx.y) * C + c] = sw;
  partial_db[static_cast<size_t>(blockIdx.y) * C + c] = sb;
}

}  // namespace

void layernorm_fwd(bf16* out, float* mean, float* rstd, const bf16* in, const bf16* w, const bf16* b, int N, int C,
                   float eps, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  layernorm_fwd_kernel<<<ceil_div(N, kWarpsPerBlock), kThreads, 0, stream>>>(out, mean, rstd, in, w, b, N, C, eps);
  CUDA_CHECK_LAUNCH("layernorm_fwd_kernel");
}

void layernorm_bwd(bf16* din_accum, float* dw, float* db, const bf16* dout, const bf16* in, const bf16* w,
                   const float* mean, const float* rstd, int N, int C, Scratch& scratch, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  layernorm_din_kernel<<<ceil_div(N, kWarpsPerBlock), kThreads, 0, stream>>>(din_accum, dout, in, w, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH("layernorm_din_kernel");

  const int n_chunks = column_chunks(N, "layernorm_bwd");
  const size_t chunk_elems = static_cast<size_t>(n_chunks) * C;
  float* partial_dw = static_cast<float*>(scratch.get(2 * chunk_elems * sizeof(float), stream));  // (n_chunks, C)
  float* partial_db = partial_dw + chunk_elems;                                                   // (n_chunks, C)
  layernorm_dwdb_partials_kernel<<<dim3(ceil_div(C, kThreads), n_chunks), kThreads, 0, stream>>>(
      partial_dw, partial_db, dout, in, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH("layernorm_dwdb_partials_kernel");
  add_column_partials(dw, partial_dw, n_chunks, C, stream);
  add_column_partials(db, partial_db, n_chunks, C, stream);
}

}  // namespace trident::gpu
