// LayerNorm kernels: one warp per row for the row-wise work; the dw/db column sums go through
// per-chunk partials added in a fixed order, so the backward pass is deterministic.
#include "layernorm.cuh"
#include "reduce.cuh"

namespace trident::gpu {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = 32 * kWarpsPerBlock;

// Rows are walked in pieces of kWidth elements per lane (kVec when the row length and the
// addresses allow 16-byte accesses, else 1); the later passes over a row hit the L1 cache.
// With kResidual the row is first summed: sum = bf16(in + residual) is stored (it may overwrite
// `in`: each lane rewrites only what it read) and normalised, saving the separate add's pass.
template <int kWidth, bool kResidual>
__global__ void layernorm_fwd_kernel(bf16* out, float* mean, float* rstd, const bf16* in, const bf16* residual,
                                     bf16* sum, const bf16* w, const bf16* b, int N, int C, float eps) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;  // whole warps leave together
  const size_t off = static_cast<size_t>(row) * C;
  const bf16* x = kResidual ? sum + off : in + off;
  float s = 0.0f;
  for (int c = lane * kWidth; c < C; c += 32 * kWidth) {
    float v[kWidth];
    load_vec(v, in + off + c);
    if (kResidual) {
      float r[kWidth];
      load_vec(r, residual + off + c);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) v[k] = to_float(to_bf16(v[k] + r[k]));   // the stored, rounded sum
      store_vec(sum + off + c, v);
    }
#pragma unroll
    for (int k = 0; k < kWidth; ++k) s += v[k];
  }
  const float m = warp_sum(s) / C;
  float var = 0.0f;  // second pass over the (cached) row: no cancellation for rows with a large mean
  for (int c = lane * kWidth; c < C; c += 32 * kWidth) {
    float v[kWidth];
    load_vec(v, x + c);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) var += (v[k] - m) * (v[k] - m);
  }
  const float r = 1.0f / sqrtf(warp_sum(var) / C + eps);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
  bf16* o = out + static_cast<size_t>(row) * C;
  for (int c = lane * kWidth; c < C; c += 32 * kWidth) {
    float v[kWidth], wv[kWidth], bv[kWidth];
    load_vec(v, x + c);
    load_vec(wv, w + c);
    load_vec(bv, b + c);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) v[k] = (v[k] - m) * r * wv[k] + bv[k];
    store_vec(o + c, v);
  }
}

// The LayerNorm backward of one row, piece by piece (kWidth columns at offset c of dout, in, w):
// first the row sums of dnorm = dout * w and dnorm * norm, then
//   din += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)),
// which also hands back the piece's dout and norm for the dw/db sums.
template <int kWidth>
__device__ __forceinline__ void add_dnorm_sums(float& s_dnorm, float& s_dnorm_norm, const bf16* dout, const bf16* in,
                                               const bf16* w, float m, float r) {
  float g[kWidth], x[kWidth], wv[kWidth];
  load_vec(g, dout);
  load_vec(x, in);
  load_vec(wv, w);
#pragma unroll
  for (int k = 0; k < kWidth; ++k) {
    const float dnorm = g[k] * wv[k];
    s_dnorm += dnorm;
    s_dnorm_norm += dnorm * ((x[k] - m) * r);
  }
}

template <int kWidth>
__device__ __forceinline__ void update_din(bf16* din_accum, const bf16* dout, const bf16* in, const bf16* w, float m,
                                           float r, float mean_dnorm, float mean_dnorm_norm, float (&g)[kWidth],
                                           float (&norm)[kWidth]) {
  float x[kWidth], wv[kWidth], d[kWidth];
  load_vec(g, dout);
  load_vec(x, in);
  load_vec(wv, w);
  load_vec(d, din_accum);
#pragma unroll
  for (int k = 0; k < kWidth; ++k) {
    norm[k] = (x[k] - m) * r;
    d[k] += r * (g[k] * wv[k] - mean_dnorm - norm[k] * mean_dnorm_norm);
  }
  store_vec(din_accum, d);
}

template <int kWidth>
__global__ void layernorm_din_kernel(bf16* din_accum, const bf16* dout, const bf16* in, const bf16* w,
                                     const float* mean, const float* rstd, int N, int C) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const size_t off = static_cast<size_t>(row) * C;
  const float m = mean[row], r = rstd[row];
  float s_dnorm = 0.0f, s_dnorm_norm = 0.0f;
  for (int c = lane * kWidth; c < C; c += 32 * kWidth)
    add_dnorm_sums<kWidth>(s_dnorm, s_dnorm_norm, dout + off + c, in + off + c, w + c, m, r);
  const float mean_dnorm = warp_sum(s_dnorm) / C;
  const float mean_dnorm_norm = warp_sum(s_dnorm_norm) / C;
  for (int c = lane * kWidth; c < C; c += 32 * kWidth) {
    float g[kWidth], norm[kWidth];
    update_din<kWidth>(din_accum + off + c, dout + off + c, in + off + c, w + c, m, r, mean_dnorm, mean_dnorm_norm, g,
                       norm);
  }
}

// dst[c] = sum over warps, in warp order, of each warp's v for column c (lane's columns as in
// layernorm_bwd_fused_kernel).
template <int kGroups>
__device__ void reduce_warp_rows(float* dst, const float (&v)[kGroups][kVec], float (*sums)[kGroups * 32 * kVec],
                                 int warp, int lane) {
  constexpr int C = kGroups * 32 * kVec;
  __syncthreads();   // the previous call's readers are done with sums
#pragma unroll
  for (int gi = 0; gi < kGroups; ++gi)
#pragma unroll
    for (int k = 0; k < kVec; ++k) sums[warp][(gi * 32 + lane) * kVec + k] = v[gi][k];
  __syncthreads();
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int w = 0; w < kWarpsPerBlock; ++w) acc += sums[w][c];
    dst[c] = acc;
  }
}

// The din pass and the dw/db partials in one, for C = kGroups * 32 * kVec: block blockIdx.x owns
// the kRowsPerPartial rows of one chunk, each warp every kWarpsPerBlock-th of them, and a lane
// keeps the dw/db sums of its columns (kVec adjacent ones per group) in registers across its
// rows. The warps' sums are then added in warp order into the chunk's partials, so dout and in
// are read once and every result is a fixed function of N and C.
template <int kGroups>
__global__ void __launch_bounds__(kThreads)
    layernorm_bwd_fused_kernel(bf16* din_accum, float* partial_dw, float* partial_db, const bf16* dout,
                               const bf16* in, const bf16* w, const float* mean, const float* rstd, int N) {
  constexpr int C = kGroups * 32 * kVec;
  __shared__ float sums[kWarpsPerBlock][C];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float dw[kGroups][kVec] = {}, db[kGroups][kVec] = {};
  const int r0 = blockIdx.x * kRowsPerPartial, r1 = min(N, r0 + kRowsPerPartial);
  for (int row = r0 + warp; row < r1; row += kWarpsPerBlock) {
    const size_t off = static_cast<size_t>(row) * C;
    const float m = mean[row], r = rstd[row];
    float s_dnorm = 0.0f, s_dnorm_norm = 0.0f;
#pragma unroll
    for (int gi = 0; gi < kGroups; ++gi) {
      const int c = (gi * 32 + lane) * kVec;
      add_dnorm_sums<kVec>(s_dnorm, s_dnorm_norm, dout + off + c, in + off + c, w + c, m, r);
    }
    const float mean_dnorm = warp_sum(s_dnorm) / C;
    const float mean_dnorm_norm = warp_sum(s_dnorm_norm) / C;
#pragma unroll
    for (int gi = 0; gi < kGroups; ++gi) {   // the row again, from L1
      const int c = (gi * 32 + lane) * kVec;
      float g[kVec], norm[kVec];
      update_din<kVec>(din_accum + off + c, dout + off + c, in + off + c, w + c, m, r, mean_dnorm, mean_dnorm_norm, g,
                       norm);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        dw[gi][k] += g[k] * norm[k];
        db[gi][k] += g[k];
      }
    }
  }
  // dw, then db through one shared row per warp.
  reduce_warp_rows<kGroups>(partial_dw + static_cast<size_t>(blockIdx.x) * C, dw, sums, warp, lane);
  reduce_warp_rows<kGroups>(partial_db + static_cast<size_t>(blockIdx.x) * C, db, sums, warp, lane);
}
// The fused kernel for this C, or null where C is not 1..4 groups of 32 lanes x kVec columns.
using FusedBwdKernel = void (*)(bf16*, float*, float*, const bf16*, const bf16*, const bf16*, const float*,
                                const float*, int);
FusedBwdKernel fused_bwd_kernel(int C) {
  if (C % (32 * kVec) != 0) return nullptr;
  switch (C / (32 * kVec)) {
    case 1: return layernorm_bwd_fused_kernel<1>;
    case 2: return layernorm_bwd_fused_kernel<2>;
    case 3: return layernorm_bwd_fused_kernel<3>;
    case 4: return layernorm_bwd_fused_kernel<4>;
    default: return nullptr;
  }
}

// Partial column sums of dout * norm and dout over the rows of one chunk (blockIdx.y); each
// thread owns kWidth adjacent columns.
template <int kWidth>
__global__ void layernorm_dwdb_partials_kernel(float* partial_dw, float* partial_db, const bf16* dout, const bf16* in,
                                               const float* mean, const float* rstd, int N, int C) {
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * kWidth;
  if (c >= C) return;
  const int r0 = blockIdx.y * kRowsPerPartial, r1 = min(N, r0 + kRowsPerPartial);
  float sw[kWidth] = {}, sb[kWidth] = {};
  for (int row = r0; row < r1; ++row) {
    const size_t i = static_cast<size_t>(row) * C + c;
    float g[kWidth], x[kWidth];
    load_vec(g, dout + i);
    load_vec(x, in + i);
    const float m = mean[row], r = rstd[row];
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      sw[k] += g[k] * ((x[k] - m) * r);
      sb[k] += g[k];
    }
  }
  store_vec(partial_dw + static_cast<size_t>(blockIdx.y) * C + c, sw);
  store_vec(partial_db + static_cast<size_t>(blockIdx.y) * C + c, sb);
}

}  // namespace

void layernorm_fwd(bf16* out, float* mean, float* rstd, const bf16* in, const bf16* w, const bf16* b, int N, int C,
                   float eps, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  const bool vec = C % kVec == 0 && aligned16(out, in, w, b);
  const auto kernel = vec ? layernorm_fwd_kernel<kVec, false> : layernorm_fwd_kernel<1, false>;
  kernel<<<ceil_div(N, kWarpsPerBlock), kThreads, 0, stream>>>(out, mean, rstd, in, nullptr, nullptr, w, b, N, C, eps);
  CUDA_CHECK_LAUNCH("layernorm_fwd_kernel");
}

void add_layernorm_fwd(bf16* sum, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* residual,
                       const bf16* w, const bf16* b, int N, int C, float eps, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  const bool vec = C % kVec == 0 && aligned16(out, a, w, b) && aligned16(sum, residual, w, b);
  const auto kernel = vec ? layernorm_fwd_kernel<kVec, true> : layernorm_fwd_kernel<1, true>;
  kernel<<<ceil_div(N, kWarpsPerBlock), kThreads, 0, stream>>>(out, mean, rstd, a, residual, sum, w, b, N, C, eps);
  CUDA_CHECK_LAUNCH("layernorm_fwd_kernel (residual)");
}

void layernorm_bwd(bf16* din_accum, float* dw, float* db, const bf16* dout, const bf16* in, const bf16* w,
                   const float* mean, const float* rstd, int N, int C, Scratch& scratch, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  const bool vec = C % kVec == 0 && aligned16(din_accum, dout, in, w);
  const int n_chunks = column_chunks(N, "layernorm_bwd");
  const size_t chunk_elems = static_cast<size_t>(n_chunks) * C;
  // Each partial row starts 16-byte aligned when C is a multiple of kVec (scratch is).
  float* partial_dw = static_cast<float*>(scratch.get(2 * chunk_elems * sizeof(float), stream));  // (n_chunks, C)
  float* partial_db = partial_dw + chunk_elems;                                                   // (n_chunks, C)

  // C up to 1,024 in whole 256-column groups (GPT-2 124M and 350M): one fused pass.
  if (const FusedBwdKernel kernel = vec ? fused_bwd_kernel(C) : nullptr) {
    kernel<<<n_chunks, kThreads, 0, stream>>>(din_accum, partial_dw, partial_db, dout, in, w, mean, rstd, N);
    CUDA_CHECK_LAUNCH("layernorm_bwd_fused_kernel");
    add_column_partials(dw, partial_dw, n_chunks, C, stream);
    add_column_partials(db, partial_db, n_chunks, C, stream);
    return;
  }

  const auto din_kernel = vec ? layernorm_din_kernel<kVec> : layernorm_din_kernel<1>;
  din_kernel<<<ceil_div(N, kWarpsPerBlock), kThreads, 0, stream>>>(din_accum, dout, in, w, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH("layernorm_din_kernel");
  const int per_thread = vec ? kVec : 1;
  const auto partials_kernel = vec ? layernorm_dwdb_partials_kernel<kVec> : layernorm_dwdb_partials_kernel<1>;
  partials_kernel<<<dim3(ceil_div(C, kThreads * per_thread), n_chunks), kThreads, 0, stream>>>(
      partial_dw, partial_db, dout, in, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH("layernorm_dwdb_partials_kernel");
  add_column_partials(dw, partial_dw, n_chunks, C, stream);
  add_column_partials(db, partial_db, n_chunks, C, stream);
}

}  // namespace trident::gpu
