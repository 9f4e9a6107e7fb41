// The wide rows' norm kernels (norm_wide.cuh). Thread t of a block of kWideThreads holds the kPer
// pieces of 8 columns at (j * kWideThreads + t) * 8, j < kPer, of its row (zeros past C), every
// load of the row issued before the first store; the row sums are block sums.
#include "norm_wide.cuh"

#include "peer_partial.cuh"
#include "reduce.cuh"

namespace trident::gpu {
namespace {

constexpr int kWideThreads = 256;
constexpr int kWideCols = kWideThreads * kVec;   // columns per piece index
constexpr int kWideMaxPieces = 4;
// Blocks of the backward: rows are cut into at most this many chunks (a function of N only, so
// that the column sums' partials are added in the same groups on every GPU), about two blocks per
// multiprocessor on an H100 or H200.
constexpr int kWideChunks = 256;

__device__ __forceinline__ int wide_col(int j) { return (j * kWideThreads + static_cast<int>(threadIdx.x)) * kVec; }

// The pieces per thread for rows of C columns, or 0 where these kernels do not take them.
int wide_pieces(int C) {
  if (C <= kWideCols || C % kVec != 0) return 0;
  const int pieces = ceil_div(C, kWideCols);
  return pieces <= kWideMaxPieces ? pieces : 0;
}

// The two row sums of the backward over the block, returned to every thread (each as block_sum
// adds it: warps, then the warps' sums in warp order).
__device__ __forceinline__ float2 block_sum2(float a, float b, float2* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  a = warp_sum(a);
  b = warp_sum(b);
  __syncthreads();   // the previous row's readers are done with `shared`
  if (lane == 0) shared[warp] = make_float2(a, b);
  __syncthreads();
  const float2 v = lane < kWideThreads / 32 ? shared[lane] : make_float2(0.0f, 0.0f);
  return make_float2(warp_sum(v.x), warp_sum(v.y));
}

// One row per block (blockIdx.x). With kResidual, sum = bf16(bf16(in + peer) + residual) (peer
// optional) is stored (it may overwrite `in`) and normalised. LayerNorm's variance is a second
// block sum over the registers (no cancellation for rows with a large mean).
template <int kPer, bool kResidual, bool kRms>
__global__ void __launch_bounds__(kWideThreads)
    norm_fwd_wide_kernel(bf16* out, float* mean, float* rstd, const bf16* in, const bf16* peer, const bf16* residual,
                         bf16* sum, const bf16* w, const bf16* b, int C, float eps, PeerRelease release) {
  __shared__ float shared[32];
  const size_t off = static_cast<size_t>(blockIdx.x) * C;
  Raw8 a[kPer], p[kPer], res[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int c = wide_col(j);
    a[j].bits = p[j].bits = res[j].bits = make_uint4(0, 0, 0, 0);
    if (c >= C) continue;
    a[j].load(in + off + c);
    if (kResidual) {
      if (peer) p[j].load(peer + off + c);
      res[j].load(residual + off + c);
    }
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    if (kResidual) {
      if (peer) a[j].add_rounded(p[j]);
      a[j].add_rounded(res[j]);   // the stored, rounded sum (zeros past C stay zeros)
      if (wide_col(j) < C) a[j].store(sum + off + wide_col(j));
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) s += kRms ? a[j][k] * a[j][k] : a[j][k];
  }
  float m = 0.0f, r;
  if constexpr (kRms) {
    r = 1.0f / sqrtf(block_sum(s, shared) / C + eps);
  } else {
    m = block_sum(s, shared) / C;
    float var = 0.0f;
#pragma unroll
    for (int j = 0; j < kPer; ++j)
      if (wide_col(j) < C)
#pragma unroll
        for (int k = 0; k < kVec; ++k) var += (a[j][k] - m) * (a[j][k] - m);
    r = 1.0f / sqrtf(block_sum(var, shared) / C + eps);
  }
  if (threadIdx.x == 0) {
    rstd[blockIdx.x] = r;
    if (!kRms) mean[blockIdx.x] = m;
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int c = wide_col(j);
    if (c >= C) continue;
    float wv[kVec], bv[kVec], v[kVec];
    load_vec(wv, w + c);
    if (!kRms) load_vec(bv, b + c);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = kRms ? a[j][k] * r * wv[k] : (a[j][k] - m) * r * wv[k] + bv[k];
    store_vec(out + off + c, v);
  }
  if (release.flag) release_when_last(release.flag, release.value, release.counter);
}

// Block blockIdx.x owns rows [r0, r0 + rows) and walks them one by one: a row's dout
// (bf16(dout + dout_peer) with kPeer), input and residual gradient loaded at once, din written,
// and the thread's own columns of the column sums updated: dout * norm for dw, in registers for
// RMSNorm; for LayerNorm dw, db (dout) and with kSum dsum (the din stored, in bf16) in shared
// memory (24 to 96 floats a thread would cost the occupancy), element k of piece j of sum a at
// ((a * kPer + j) * kVec + k) * kWideThreads + thread. At the end each sum's chunk row is stored,
// to be added in chunk order by add_column_partials. Compiled for two blocks per multiprocessor.
template <int kPer, bool kPeer, bool kRms, bool kSum>
__global__ void __launch_bounds__(kWideThreads, 2)
    norm_bwd_wide_kernel(bf16* din_accum, bf16* din_keep, float* partial_dw, float* partial_db, float* partial_ds,
                         const bf16* dout, const bf16* dout_peer, const bf16* in, const bf16* w, const float* mean,
                         const float* rstd, int N, int C, int rows, PeerRelease release) {
  static_assert(!(kRms && kSum), "RMSNorm has no dsum");
  constexpr int kSums = kRms ? 0 : (kSum ? 3 : 2);   // in shared memory
  __shared__ float2 shared[32];
  extern __shared__ float4 wide_smem[];
  float* sums = reinterpret_cast<float*>(wide_smem);
  auto acc = [&](int a, int j, int k) -> float& {
    return sums[((a * kPer + j) * kVec + k) * kWideThreads + threadIdx.x];
  };
  float dw[kRms ? kPer : 1][kVec] = {};
#pragma unroll
  for (int a = 0; a < kSums; ++a)
#pragma unroll
    for (int j = 0; j < kPer; ++j)
#pragma unroll
      for (int k = 0; k < kVec; ++k) acc(a, j, k) = 0.0f;
  const int r0 = blockIdx.x * rows, r1 = min(N, r0 + rows);
  for (int row = r0; row < r1; ++row) {
    const size_t off = static_cast<size_t>(row) * C;
    Raw8 g[kPer], q[kPer], x[kPer], d[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int c = wide_col(j);
      g[j].bits = q[j].bits = x[j].bits = d[j].bits = make_uint4(0, 0, 0, 0);
      if (c >= C) continue;
      g[j].load(dout + off + c);
      if (kPeer) q[j].load(dout_peer + off + c);
      x[j].load(in + off + c);
      d[j].load(din_accum + off + c);
    }
    const float m = kRms ? 0.0f : mean[row], r = rstd[row];
    float s_dnorm = 0.0f, s_dnorm_norm = 0.0f;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int c = wide_col(j);
      if (c >= C) continue;
      if (kPeer) g[j].add_rounded(q[j]);
      if (din_keep) d[j].store(din_keep + off + c);
      float wv[kVec];
      load_vec(wv, w + c);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float dnorm = g[j][k] * wv[k];
        s_dnorm += dnorm;
        s_dnorm_norm += dnorm * ((x[j][k] - m) * r);
      }
    }
    const float2 row_sums = block_sum2(s_dnorm, s_dnorm_norm, shared);
    const float mean_dnorm = kRms ? 0.0f : row_sums.x / C, mean_dnorm_norm = row_sums.y / C;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int c = wide_col(j);
      if (c >= C) continue;
      float wv[kVec], o[kVec];
      load_vec(wv, w + c);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float norm = (x[j][k] - m) * r;
        o[k] = d[j][k] + r * (g[j][k] * wv[k] - mean_dnorm - norm * mean_dnorm_norm);
        if constexpr (kRms) {
          dw[j][k] += g[j][k] * norm;
        } else {
          acc(0, j, k) += g[j][k] * norm;
          acc(1, j, k) += g[j][k];
          if (kSum) acc(2, j, k) += to_float(to_bf16(o[k]));
        }
      }
      store_vec(din_accum + off + c, o);
    }
  }
  float* partials[3] = {partial_dw, partial_db, partial_ds};
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int c = wide_col(j);
    if (c >= C) continue;
    const size_t at = static_cast<size_t>(blockIdx.x) * C + c;
    if constexpr (kRms) {
      store_vec(partial_dw + at, dw[j]);
    } else {
#pragma unroll
      for (int a = 0; a < kSums; ++a) {
        float v[kVec];
#pragma unroll
        for (int k = 0; k < kVec; ++k) v[k] = acc(a, j, k);
        store_vec(partials[a] + at, v);
      }
    }
  }
  if (release.flag) release_when_last(release.flag, release.value, release.counter);
}

template <bool kResidual, bool kRms>
auto fwd_kernel(int pieces) -> decltype(&norm_fwd_wide_kernel<2, kResidual, kRms>) {
  switch (pieces) {
    case 2: return norm_fwd_wide_kernel<2, kResidual, kRms>;
    case 3: return norm_fwd_wide_kernel<3, kResidual, kRms>;
    case 4: return norm_fwd_wide_kernel<4, kResidual, kRms>;
    default: return nullptr;
  }
}

using BwdKernel = void (*)(bf16*, bf16*, float*, float*, float*, const bf16*, const bf16*, const bf16*, const bf16*,
                           const float*, const float*, int, int, int, PeerRelease);

template <bool kPeer, bool kRms, bool kSum>
BwdKernel bwd_kernel(int pieces) {
  switch (pieces) {
    case 2: return norm_bwd_wide_kernel<2, kPeer, kRms, kSum>;
    case 3: return norm_bwd_wide_kernel<3, kPeer, kRms, kSum>;
    case 4: return norm_bwd_wide_kernel<4, kPeer, kRms, kSum>;
    default: return nullptr;
  }
}

template <bool kPeer>
BwdKernel bwd_kernel(bool rms, bool sum, int pieces) {
  if (rms) return bwd_kernel<kPeer, true, false>(pieces);
  return sum ? bwd_kernel<kPeer, false, true>(pieces) : bwd_kernel<kPeer, false, false>(pieces);
}

}  // namespace

bool norm_fwd_wide(bf16* out, float* mean, float* rstd, const bf16* in, const bf16* peer, const bf16* residual,
                   bf16* sum, const bf16* w, const bf16* b, int N, int C, float eps, const PeerRelease& release,
                   cudaStream_t stream) {
  const int pieces = wide_pieces(C);
  if (!pieces || !aligned16(out, in, peer, residual, sum, w, b)) return false;
  const bool rms = mean == nullptr;
  const auto kernel = sum ? (rms ? fwd_kernel<true, true>(pieces) : fwd_kernel<true, false>(pieces))
                          : (rms ? fwd_kernel<false, true>(pieces) : fwd_kernel<false, false>(pieces));
  kernel<<<N, kWideThreads, 0, stream>>>(out, mean, rstd, in, peer, residual, sum, w, b, C, eps, release);
  CUDA_CHECK_LAUNCH("norm_fwd_wide_kernel");
  return true;
}

bool norm_bwd_wide(bf16* din_accum, bf16* din_keep, float* dw, float* db, float* dsum, const bf16* dout,
                   const bf16* dout_peer, const bf16* in, const bf16* w, const float* mean, const float* rstd, int N,
                   int C, const PeerRelease& release, Scratch& scratch, cudaStream_t stream) {
  const int pieces = wide_pieces(C);
  if (!pieces || !aligned16(din_accum, din_keep, dout, dout_peer, in, w)) return false;
  const bool rms = mean == nullptr;
  const int arrays = rms ? 1 : (dsum ? 3 : 2);   // dw[, db[, dsum]]
  // LayerNorm's sums in shared memory: 16 or 24 KiB per piece (96 KiB at C 8,192 with dsum); a
  // GPU that gives a block less takes the separate kernels.
  const size_t smem = rms ? 0 : static_cast<size_t>(arrays) * pieces * kVec * kWideThreads * sizeof(float);
  if (smem + sizeof(float2) * 32 > max_smem_per_block()) return false;   // with the static row sums
  const BwdKernel kernel = dout_peer ? bwd_kernel<true>(rms, dsum, pieces) : bwd_kernel<false>(rms, dsum, pieces);
  if (smem > 0) allow_smem(kernel, smem);
  const int rows = ceil_div(N, kWideChunks), n_chunks = ceil_div(N, rows);
  const size_t chunk_elems = static_cast<size_t>(n_chunks) * C;
  // (n_chunks, C) each, one after another: dw[, db[, dsum]]; each row 16-byte aligned (scratch is).
  float* partials = static_cast<float*>(scratch.get(arrays * chunk_elems * sizeof(float), stream));
  float* partial_db = arrays > 1 ? partials + chunk_elems : nullptr;
  float* partial_ds = arrays > 2 ? partials + 2 * chunk_elems : nullptr;
  kernel<<<n_chunks, kWideThreads, smem, stream>>>(din_accum, din_keep, partials, partial_db, partial_ds, dout,
                                                   dout_peer, in, w, mean, rstd, N, C, rows, release);
  CUDA_CHECK_LAUNCH("norm_bwd_wide_kernel");
  if (rms) {
    add_column_partials(dw, partials, n_chunks, C, stream);
  } else if (dsum) {
    add_column_partials({dw, db, dsum}, partials, n_chunks, C, stream);
  } else {
    add_column_partials({dw, db}, partials, n_chunks, C, stream);
  }
  return true;
}

}  // namespace trident::gpu
