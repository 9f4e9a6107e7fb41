// RMSNorm kernels: one warp per row for the row-wise work, as the LayerNorm kernels (rows of 2,056
// to 8,192 columns take norm_wide's instead); the dw column sums go through per-chunk partials
// added in a fixed order, so the backward pass is deterministic.
#include "elementwise.cuh"
#include "layernorm.cuh"
#include "norm_wide.cuh"
#include "peer_partial.cuh"
#include "reduce.cuh"
#include "rmsnorm.cuh"

namespace trident::gpu {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = 32 * kWarpsPerBlock;

// One row of rmsnorm_fwd_kernel (one warp), in pieces of kWidth elements per lane (kVec when the
// row length and the addresses allow 16-byte accesses, else 1); the second pass over a row hits
// the L1 cache. With kResidual the row is first summed: sum = bf16(in + residual) is stored (it
// may overwrite `in`: each lane rewrites only what it read) and normalised, saving the separate
// add's pass; with `peer` too (the other TP rank's partial of `in`), sum = bf16(bf16(in + peer) +
// residual), the pair's sum rounded as the all-reduce it replaces would leave it.
template <int kWidth, bool kResidual>
__device__ __forceinline__ void rmsnorm_row(bf16* out, float* rstd, const bf16* in, const bf16* peer,
                                            const bf16* residual, bf16* sum, const bf16* w, int row, int lane, int C,
                                            float eps) {
  const size_t off = static_cast<size_t>(row) * C;
  const bf16* x = kResidual ? sum + off : in + off;
  float ss = 0.0f;
  for (int c = lane * kWidth; c < C; c += 32 * kWidth) {
    float v[kWidth];
    load_vec(v, in + off + c);
    if (kResidual) {
      if (peer) add_rounded(v, peer + off + c);
      add_rounded(v, residual + off + c);   // the stored, rounded sum
      store_vec(sum + off + c, v);
    }
#pragma unroll
    for (int k = 0; k < kWidth; ++k) ss += v[k] * v[k];
  }
  const float r = 1.0f / sqrtf(warp_sum(ss) / C + eps);
  if (lane == 0) rstd[row] = r;
  bf16* o = out + off;
  for (int c = lane * kWidth; c < C; c += 32 * kWidth) {
    float v[kWidth], wv[kWidth];
    load_vec(v, x + c);
    load_vec(wv, w + c);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) v[k] = v[k] * r * wv[k];
    store_vec(o + c, v);
  }
}

// With release.flag (and peer), the last block frees the peer partial (release_when_last).
template <int kWidth, bool kResidual>
__global__ void rmsnorm_fwd_kernel(bf16* out, float* rstd, const bf16* in, const bf16* peer, const bf16* residual,
                                   bf16* sum, const bf16* w, int N, int C, float eps, PeerRelease release) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row < N) rmsnorm_row<kWidth, kResidual>(out, rstd, in, peer, residual, sum, w, row, lane, C, eps);
  if (release.flag) release_when_last(release.flag, release.value, release.counter);
}

// din += rstd * (dnorm - norm * mean(dnorm * norm)), dnorm = dout * w, norm = in * rstd: one warp
// per row, the row sum first.
template <int kWidth>
__global__ void rmsnorm_din_kernel(bf16* din_accum, const bf16* dout, const bf16* in, const bf16* w,
                                   const float* rstd, int N, int C) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const size_t off = static_cast<size_t>(row) * C;
  const float r = rstd[row];
  float s = 0.0f;
  for (int c = lane * kWidth; c < C; c += 32 * kWidth) {
    float g[kWidth], x[kWidth], wv[kWidth];
    load_vec(g, dout + off + c);
    load_vec(x, in + off + c);
    load_vec(wv, w + c);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) s += g[k] * wv[k] * (x[k] * r);
  }
  const float mean_dnorm_norm = warp_sum(s) / C;
  for (int c = lane * kWidth; c < C; c += 32 * kWidth) {
    float g[kWidth], x[kWidth], wv[kWidth], d[kWidth];
    load_vec(g, dout + off + c);
    load_vec(x, in + off + c);
    load_vec(wv, w + c);
    load_vec(d, din_accum + off + c);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) d[k] += r * (g[k] * wv[k] - x[k] * r * mean_dnorm_norm);
    store_vec(din_accum + off + c, d);
  }
}

// Partial column sums of dout * norm over the rows of one chunk (blockIdx.y); each thread owns
// kWidth adjacent columns.
template <int kWidth>
__global__ void rmsnorm_dw_partials_kernel(float* partial_dw, const bf16* dout, const bf16* in, const float* rstd,
                                           int N, int C) {
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * kWidth;
  if (c >= C) return;
  const int r0 = blockIdx.y * kRowsPerPartial, r1 = min(N, r0 + kRowsPerPartial);
  float sw[kWidth] = {};
  for (int row = r0; row < r1; ++row) {
    const size_t i = static_cast<size_t>(row) * C + c;
    float g[kWidth], x[kWidth];
    load_vec(g, dout + i);
    load_vec(x, in + i);
    const float r = rstd[row];
#pragma unroll
    for (int k = 0; k < kWidth; ++k) sw[k] += g[k] * (x[k] * r);
  }
  store_vec(partial_dw + static_cast<size_t>(blockIdx.y) * C + c, sw);
}

}  // namespace

void rmsnorm_fwd(bf16* out, float* rstd, const bf16* in, const bf16* w, int N, int C, float eps, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  if (norm_fwd_wide(out, nullptr, rstd, in, nullptr, nullptr, nullptr, w, nullptr, N, C, eps, PeerRelease{}, stream))
    return;
  const bool vec = C % kVec == 0 && aligned16(out, in, w);
  const auto kernel = vec ? rmsnorm_fwd_kernel<kVec, false> : rmsnorm_fwd_kernel<1, false>;
  kernel<<<ceil_div(N, kWarpsPerBlock), kThreads, 0, stream>>>(out, rstd, in, nullptr, nullptr, nullptr, w, N, C, eps,
                                                                PeerRelease{});
  CUDA_CHECK_LAUNCH("rmsnorm_fwd");
}

void add_rmsnorm_fwd(bf16* sum, bf16* out, float* rstd, const bf16* a, const bf16* a_peer, const bf16* residual,
                     const bf16* w, int N, int C, float eps, const PeerRelease& release, cudaStream_t stream) {
  if (N == 0 || C == 0) {
    if (release) release_after(release, stream);
    return;
  }
  if (norm_fwd_wide(out, nullptr, rstd, a, a_peer, residual, sum, w, nullptr, N, C, eps, release, stream)) return;
  const bool vec = C % kVec == 0 && aligned16(sum, out, a, residual, w) && (!a_peer || aligned16(a_peer));
  const auto kernel = vec ? rmsnorm_fwd_kernel<kVec, true> : rmsnorm_fwd_kernel<1, true>;
  kernel<<<ceil_div(N, kWarpsPerBlock), kThreads, 0, stream>>>(out, rstd, a, a_peer, residual, sum, w, N, C, eps,
                                                                release);
  CUDA_CHECK_LAUNCH("add_rmsnorm_fwd");
}

void rmsnorm_bwd(bf16* din_accum, bf16* din_keep, float* dw, const bf16* dout, const bf16* dout_peer, const bf16* in,
                 const bf16* w, const float* rstd, int N, int C, const PeerRelease& release, Scratch& scratch,
                 cudaStream_t stream) {
  if (N == 0 || C == 0) {
    if (release) release_after(release, stream);
    return;
  }
  if (rmsnorm_bwd_fused(din_accum, din_keep, dw, dout, dout_peer, in, w, rstd, N, C, release, scratch, stream)) return;
  if (norm_bwd_wide(din_accum, din_keep, dw, nullptr, nullptr, dout, dout_peer, in, w, nullptr, rstd, N, C, release,
                    scratch, stream))
    return;
  const bool vec = C % kVec == 0 && aligned16(din_accum, dout, in, w) && (!dout_peer || aligned16(dout_peer));
  const int n_chunks = column_chunks(N, "rmsnorm_bwd");
  const size_t chunk_elems = static_cast<size_t>(n_chunks) * C;
  // (n_chunks, C) dw partials, each row 16-byte aligned when C is a multiple of kVec (scratch is);
  // then, with dout_peer, the summed gradient (N, C) the kernels read, as layernorm_bwd's.
  Carver measure;
  measure.take<float>(chunk_elems);
  if (dout_peer) measure.take<bf16>(static_cast<size_t>(N) * C);
  Carver carve(scratch.get(measure.used(), stream));
  float* partial_dw = carve.take<float>(chunk_elems);
  if (dout_peer) {
    bf16* summed = carve.take<bf16>(static_cast<size_t>(N) * C);
    add(summed, dout, dout_peer, static_cast<size_t>(N) * C, stream);
    if (release) release_after(release, stream);   // the add was dout_peer's only reader
    dout = summed;
  }
  keep_rows(din_keep, din_accum, N, C, stream);
  const auto din_kernel = vec ? rmsnorm_din_kernel<kVec> : rmsnorm_din_kernel<1>;
  din_kernel<<<ceil_div(N, kWarpsPerBlock), kThreads, 0, stream>>>(din_accum, dout, in, w, rstd, N, C);
  CUDA_CHECK_LAUNCH("rmsnorm_din_kernel");
  const int per_thread = vec ? kVec : 1;
  const auto partials_kernel = vec ? rmsnorm_dw_partials_kernel<kVec> : rmsnorm_dw_partials_kernel<1>;
  partials_kernel<<<dim3(ceil_div(C, kThreads * per_thread), n_chunks), kThreads, 0, stream>>>(partial_dw, dout, in,
                                                                                               rstd, N, C);
  CUDA_CHECK_LAUNCH("rmsnorm_dw_partials_kernel");
  add_column_partials(dw, partial_dw, n_chunks, C, stream);
}

}  // namespace trident::gpu
