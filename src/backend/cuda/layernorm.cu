// LayerNorm kernels: one warp per row for the row-wise work (rows of 2,056 to 8,192 columns take
// norm_wide's instead); the dw/db column sums go through per-chunk partials added in a fixed
// order, so the backward pass is deterministic.
#include "layernorm.cuh"
#include "elementwise.cuh"
#include "norm_wide.cuh"
#include "peer_partial.cuh"
#include "reduce.cuh"

namespace trident::gpu {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = 32 * kWarpsPerBlock;

// One row of layernorm_fwd_kernel (one warp).
// Rows are walked in pieces of kWidth elements per lane (kVec when the row length and the
// addresses allow 16-byte accesses, else 1); the later passes over a row hit the L1 cache.
// With kResidual the row is first summed: sum = bf16(in + residual) is stored (it may overwrite
// `in`: each lane rewrites only what it read) and normalised, saving the separate add's pass;
// with `peer` too (the other TP rank's partial of `in`), sum = bf16(bf16(in + peer) + residual),
// the pair's sum rounded as the all-reduce it replaces would leave it.
template <int kWidth, bool kResidual>
__device__ __forceinline__ void layernorm_row(bf16* out, float* mean, float* rstd, const bf16* in, const bf16* peer,
                                              const bf16* residual, bf16* sum, const bf16* w, const bf16* b, int row,
                                              int lane, int C, float eps) {
  const size_t off = static_cast<size_t>(row) * C;
  const bf16* x = kResidual ? sum + off : in + off;
  float s = 0.0f;
  for (int c = lane * kWidth; c < C; c += 32 * kWidth) {
    float v[kWidth];
    load_vec(v, in + off + c);
    if (kResidual) {
      if (peer) add_rounded(v, peer + off + c);
      add_rounded(v, residual + off + c);   // the stored, rounded sum
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

// With release.flag (and peer), the last block frees the peer partial (release_when_last).
template <int kWidth, bool kResidual>
__global__ void layernorm_fwd_kernel(bf16* out, float* mean, float* rstd, const bf16* in, const bf16* peer,
                                     const bf16* residual, bf16* sum, const bf16* w, const bf16* b, int N, int C,
                                     float eps, PeerRelease release) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row < N) layernorm_row<kWidth, kResidual>(out, mean, rstd, in, peer, residual, sum, w, b, row, lane, C, eps);
  if (release.flag) release_when_last(release.flag, release.value, release.counter);
}

// The LayerNorm backward of one row, piece by piece (kWidth columns at offset c of dout, in, w):
// first the row sums of dnorm = dout * w and dnorm * norm, then
//   din += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)).
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
                                           float r, float mean_dnorm, float mean_dnorm_norm) {
  float g[kWidth], x[kWidth], wv[kWidth], d[kWidth];
  load_vec(g, dout);
  load_vec(x, in);
  load_vec(wv, w);
  load_vec(d, din_accum);
#pragma unroll
  for (int k = 0; k < kWidth; ++k) d[k] += r * (g[k] * wv[k] - mean_dnorm - (x[k] - m) * r * mean_dnorm_norm);
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
  for (int c = lane * kWidth; c < C; c += 32 * kWidth)
    update_din<kWidth>(din_accum + off + c, dout + off + c, in + off + c, w + c, m, r, mean_dnorm, mean_dnorm_norm);
}

// Rows per block of the fused backward: 4 per warp, so that GPT-2's 32,768 rows make about four
// waves of blocks (a short last wave costs less), at the cost of more, still small, partial rows.
constexpr int kFusedRows = 4 * kWarpsPerBlock;

// The din pass and the dw/db partials in one, for C of kGroups groups of 32 lanes x kVec
// columns (the last group partly filled where C is not a multiple of 256: lanes past C load
// zeros and store nothing): block blockIdx.x owns the kFusedRows rows of one chunk, each warp
// every kWarpsPerBlock-th of them. A warp loads a row's dout, input and residual gradient at once
// (one memory latency per row), reduces the row sums, writes the row's din and adds dout * norm
// and dout into its own shared-memory rows of the dw/db sums (registers would hold 2 C / 32
// floats per lane and halve the occupancy). The warps' rows are then added in warp order into
// the chunk's partials, so every result is a fixed function of N and C. With kSum the block also
// writes the column sums of the din rows it stored, read back after the barrier (from L2): a
// third shared-memory sum updated per row cost about what it saved. With kPeer, dout is this TP rank's
// partial and dout_peer the other's: the row's gradient is bf16(dout + dout_peer), as the
// all-reduce it replaces would leave it. With kRms it is the RMSNorm backward: no mean (norm =
// in * rstd), no mean(dnorm) term and no db (partial_db unused). Up to 4 groups (C <= 1,024) it is
// compiled for two blocks per multiprocessor (128 registers at C = 768; three blocks would
// spill: 0.075 against 0.039 ms at N = 16384 on H200); wider rows get one block of 8 warps, whose
// 8 rows of 3 x C bf16 in flight still cover the memory latency.
template <int kGroups, bool kSum, bool kPeer, bool kRms = false>
__global__ void __launch_bounds__(kThreads, kGroups <= 4 ? 2 : 1)
    layernorm_bwd_fused_kernel(bf16* din_accum, bf16* din_keep, float* partial_dw, float* partial_db, float* partial_ds,
                               const bf16* dout, const bf16* dout_peer, const bf16* in, const bf16* w,
                               const float* mean, const float* rstd, int N, int C, PeerRelease release) {
  constexpr int kC = kGroups * 32 * kVec;   // the shared-memory rows' length
  // Up to 4 groups only whole ones are launched: the row length is then a compile-time constant.
  constexpr bool kRagged = kGroups > 4;
  const int cols = kRagged ? C : kC;
  extern __shared__ float4 fused_smem[];
  float(*sums)[kWarpsPerBlock][kC] = reinterpret_cast<float(*)[kWarpsPerBlock][kC]>(fused_smem);  // dw, db
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Whether this lane's columns of group gi are in the row (always, up to the last group).
  auto in_row = [&](int gi) { return !kRagged || gi + 1 < kGroups || (gi * 32 + lane) * kVec < cols; };
  Raw8 wv[kGroups];
#pragma unroll
  for (int gi = 0; gi < kGroups; ++gi) {
    const int c = (gi * 32 + lane) * kVec;
    wv[gi].bits = make_uint4(0, 0, 0, 0);
    if (in_row(gi)) wv[gi].load(w + c);
#pragma unroll
    for (int k = 0; k < kVec; ++k) sums[0][warp][c + k] = sums[1][warp][c + k] = 0.0f;
  }
  const int r0 = blockIdx.x * kFusedRows, r1 = min(N, r0 + kFusedRows);
  for (int row = r0 + warp; row < r1; row += kWarpsPerBlock) {
    const size_t off = static_cast<size_t>(row) * cols;
    Raw8 g[kGroups], x[kGroups], d[kGroups];
#pragma unroll
    for (int gi = 0; gi < kGroups; ++gi) {
      const int c = (gi * 32 + lane) * kVec;
      if (in_row(gi)) {
        g[gi].load(dout + off + c);
        if constexpr (kPeer) {
          Raw8 q;
          q.load(dout_peer + off + c);
          g[gi].add_rounded(q);
        }
        x[gi].load(in + off + c);
        d[gi].load(din_accum + off + c);
        if (din_keep) *reinterpret_cast<uint4*>(din_keep + off + c) = d[gi].bits;
      } else {
        g[gi].bits = x[gi].bits = d[gi].bits = make_uint4(0, 0, 0, 0);
      }
    }
    const float m = kRms ? 0.0f : mean[row], r = rstd[row];
    float s_dnorm = 0.0f, s_dnorm_norm = 0.0f;
#pragma unroll
    for (int gi = 0; gi < kGroups; ++gi)
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float dnorm = g[gi][k] * wv[gi][k];   // 0 past the row's end
        s_dnorm += dnorm;
        s_dnorm_norm += dnorm * ((x[gi][k] - m) * r);
      }
    const float mean_dnorm = kRms ? 0.0f : warp_sum(s_dnorm) / cols;
    const float mean_dnorm_norm = warp_sum(s_dnorm_norm) / cols;
#pragma unroll
    for (int gi = 0; gi < kGroups; ++gi) {
      if (!in_row(gi)) continue;
      const int c = (gi * 32 + lane) * kVec;
      float out[kVec], dw[kVec], db[kVec];
      load_vec(dw, &sums[0][warp][c]);
      load_vec(db, &sums[1][warp][c]);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float norm = (x[gi][k] - m) * r;
        out[k] = d[gi][k] + r * (g[gi][k] * wv[gi][k] - mean_dnorm - norm * mean_dnorm_norm);
        dw[k] += g[gi][k] * norm;
        db[k] += g[gi][k];
      }
      store_vec(din_accum + off + c, out);
      store_vec(&sums[0][warp][c], dw);
      if (!kRms) store_vec(&sums[1][warp][c], db);
    }
  }
  __syncthreads();  // also orders every warp's din stores before the reads below
  float* partials[2] = {partial_dw, partial_db};
#pragma unroll
  for (int i = 0; i < (kRms ? 1 : 2); ++i)
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      float acc = 0.0f;
      for (int wi = 0; wi < kWarpsPerBlock; ++wi) acc += sums[i][wi][c];
      partials[i][static_cast<size_t>(blockIdx.x) * cols + c] = acc;
    }
  if constexpr (kSum) {
    for (int c = threadIdx.x * kVec; c < cols; c += blockDim.x * kVec) {
      float acc[kVec] = {};
#pragma unroll 8
      for (int row = r0; row < r1; ++row) {
        float v[kVec];
        load_vec(v, din_accum + static_cast<size_t>(row) * cols + c);
#pragma unroll
        for (int k = 0; k < kVec; ++k) acc[k] += v[k];
      }
      store_vec(partial_ds + static_cast<size_t>(blockIdx.x) * cols + c, acc);
    }
  }
  if (release.flag) release_when_last(release.flag, release.value, release.counter);
}
// The fused kernel for this C with its shared memory (allowed on every call, see allow_smem), or
// null where C is not a multiple of kVec, is above 8 groups of 32 lanes x kVec columns (2,048),
// or is up to 4 groups but not whole ones (those rows take the separate kernels, as before).
using FusedBwdKernel = void (*)(bf16*, bf16*, float*, float*, float*, const bf16*, const bf16*, const bf16*,
                                const bf16*, const float*, const float*, int, int, PeerRelease);
template <bool kSum, bool kPeer, bool kRms = false>
FusedBwdKernel fused_bwd_kernel(int C, size_t* smem) {
  constexpr int kGroupCols = 32 * kVec;
  if (C % kVec != 0) return nullptr;
  const int groups = ceil_div(C, kGroupCols);
  if (groups <= 4 && C % kGroupCols != 0) return nullptr;
  FusedBwdKernel kernel = nullptr;
  switch (groups) {
    case 1: kernel = layernorm_bwd_fused_kernel<1, kSum, kPeer, kRms>; break;
    case 2: kernel = layernorm_bwd_fused_kernel<2, kSum, kPeer, kRms>; break;
    case 3: kernel = layernorm_bwd_fused_kernel<3, kSum, kPeer, kRms>; break;
    case 4: kernel = layernorm_bwd_fused_kernel<4, kSum, kPeer, kRms>; break;
    case 5: kernel = layernorm_bwd_fused_kernel<5, kSum, kPeer, kRms>; break;
    case 6: kernel = layernorm_bwd_fused_kernel<6, kSum, kPeer, kRms>; break;
    case 7: kernel = layernorm_bwd_fused_kernel<7, kSum, kPeer, kRms>; break;
    case 8: kernel = layernorm_bwd_fused_kernel<8, kSum, kPeer, kRms>; break;
    default: return nullptr;
  }
  *smem = 2 * kWarpsPerBlock * static_cast<size_t>(groups) * kGroupCols * sizeof(float);
  // 16 KiB per group: wide rows need up to 128 KiB, more than some GPUs give a block (sm_86/89:
  // 99 KiB); those take the separate kernels.
  if (*smem > max_smem_per_block()) return nullptr;
  allow_smem(kernel, *smem);
  return kernel;
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
  if (norm_fwd_wide(out, mean, rstd, in, nullptr, nullptr, nullptr, w, b, N, C, eps, PeerRelease{}, stream)) return;
  const bool vec = C % kVec == 0 && aligned16(out, in, w, b);
  const auto kernel = vec ? layernorm_fwd_kernel<kVec, false> : layernorm_fwd_kernel<1, false>;
  kernel<<<ceil_div(N, kWarpsPerBlock), kThreads, 0, stream>>>(out, mean, rstd, in, nullptr, nullptr, nullptr, w, b, N,
                                                                C, eps, PeerRelease{});
  CUDA_CHECK_LAUNCH("layernorm_fwd");
}

void add_layernorm_fwd(bf16* sum, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* a_peer,
                       const bf16* residual, const bf16* w, const bf16* b, int N, int C, float eps,
                       const PeerRelease& release, cudaStream_t stream) {
  if (N == 0 || C == 0) {
    if (release) release_after(release, stream);
    return;
  }
  if (norm_fwd_wide(out, mean, rstd, a, a_peer, residual, sum, w, b, N, C, eps, release, stream)) return;
  const bool vec = C % kVec == 0 && aligned16(out, a, w, b) && aligned16(sum, residual, w, b) &&
                   (!a_peer || aligned16(a_peer));
  const auto kernel = vec ? layernorm_fwd_kernel<kVec, true> : layernorm_fwd_kernel<1, true>;
  kernel<<<ceil_div(N, kWarpsPerBlock), kThreads, 0, stream>>>(out, mean, rstd, a, a_peer, residual, sum, w, b, N, C,
                                                                eps, release);
  CUDA_CHECK_LAUNCH("add_layernorm_fwd");
}

void keep_rows(bf16* din_keep, const bf16* din_accum, int N, int C, cudaStream_t stream) {
  if (!din_keep) return;
  CUDA_CHECK(cudaMemcpyAsync(din_keep, din_accum, static_cast<size_t>(N) * C * sizeof(bf16), cudaMemcpyDeviceToDevice,
                             stream));
}

void layernorm_bwd(bf16* din_accum, bf16* din_keep, float* dw, float* db, float* dsum, const bf16* dout,
                   const bf16* dout_peer, const bf16* in, const bf16* w, const float* mean, const float* rstd, int N,
                   int C, const PeerRelease& release, Scratch& scratch, cudaStream_t stream) {
  if (N == 0 || C == 0) {
    if (release) release_after(release, stream);
    return;
  }
  const bool vec = C % kVec == 0 && aligned16(din_accum, dout, in, w) && (!dout_peer || aligned16(dout_peer)) &&
                   (!din_keep || aligned16(din_keep));
  // C in whole 256-column groups up to 1,024 (GPT-2 124M, 350M) or any multiple of 8 from 1,032
  // to 2,048 (774M, 1.5B): one fused pass.
  size_t fused_smem = 0;
  FusedBwdKernel kernel = nullptr;
  if (vec) {
    if (dout_peer)
      kernel = dsum ? fused_bwd_kernel<true, true>(C, &fused_smem) : fused_bwd_kernel<false, true>(C, &fused_smem);
    else
      kernel = dsum ? fused_bwd_kernel<true, false>(C, &fused_smem) : fused_bwd_kernel<false, false>(C, &fused_smem);
  }
  if (kernel) {
    const int n_chunks = ceil_div(N, kFusedRows);
    const size_t chunk_elems = static_cast<size_t>(n_chunks) * C;
    // Each partial row starts 16-byte aligned when C is a multiple of kVec (scratch is).
    // (n_chunks, C) each: dw, db[, dsum].
    float* partial_dw = static_cast<float*>(scratch.get((dsum ? 3 : 2) * chunk_elems * sizeof(float), stream));
    float* partial_db = partial_dw + chunk_elems;
    float* partial_ds = dsum ? partial_db + chunk_elems : nullptr;
    kernel<<<n_chunks, kThreads, fused_smem, stream>>>(din_accum, din_keep, partial_dw, partial_db, partial_ds, dout,
                                                       dout_peer, in, w, mean, rstd, N, C, release);
    CUDA_CHECK_LAUNCH("layernorm_bwd_fused_kernel");
    if (dsum) {
      add_column_partials({dw, db, dsum}, partial_dw, n_chunks, C, stream);
    } else {
      add_column_partials({dw, db}, partial_dw, n_chunks, C, stream);
    }
    return;
  }
  if (norm_bwd_wide(din_accum, din_keep, dw, db, dsum, dout, dout_peer, in, w, mean, rstd, N, C, release, scratch,
                    stream))
    return;

  const int n_chunks = column_chunks(N, "layernorm_bwd");
  const size_t chunk_elems = static_cast<size_t>(n_chunks) * C;
  // (n_chunks, C) each: dw, db; then, with dout_peer, the summed gradient (N, C) the kernels read.
  Carver measure;
  measure.take<float>(2 * chunk_elems);
  if (dout_peer) measure.take<bf16>(static_cast<size_t>(N) * C);
  Carver carve(scratch.get(measure.used(), stream));
  float* partial_dw = carve.take<float>(2 * chunk_elems);
  float* partial_db = partial_dw + chunk_elems;
  if (dout_peer) {
    bf16* summed = carve.take<bf16>(static_cast<size_t>(N) * C);
    add(summed, dout, dout_peer, static_cast<size_t>(N) * C, stream);
    if (release) release_after(release, stream);   // the add was dout_peer's only reader
    dout = summed;
  }
  keep_rows(din_keep, din_accum, N, C, stream);
  const auto din_kernel = vec ? layernorm_din_kernel<kVec> : layernorm_din_kernel<1>;
  din_kernel<<<ceil_div(N, kWarpsPerBlock), kThreads, 0, stream>>>(din_accum, dout, in, w, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH("layernorm_din_kernel");
  const int per_thread = vec ? kVec : 1;
  const auto partials_kernel = vec ? layernorm_dwdb_partials_kernel<kVec> : layernorm_dwdb_partials_kernel<1>;
  partials_kernel<<<dim3(ceil_div(C, kThreads * per_thread), n_chunks), kThreads, 0, stream>>>(
      partial_dw, partial_db, dout, in, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH("layernorm_dwdb_partials_kernel");
  add_column_partials({dw, db}, partial_dw, n_chunks, C, stream);
  if (dsum) add_column_sums(dsum, din_accum, N, C, scratch, stream);
}

bool rmsnorm_bwd_fused(bf16* din_accum, bf16* din_keep, float* dw, const bf16* dout, const bf16* dout_peer,
                       const bf16* in, const bf16* w, const float* rstd, int N, int C, const PeerRelease& release,
                       Scratch& scratch, cudaStream_t stream) {
  size_t smem = 0;
  FusedBwdKernel kernel = nullptr;
  if (C % kVec == 0 && aligned16(din_accum, dout, in, w) && (!dout_peer || aligned16(dout_peer)) &&
      (!din_keep || aligned16(din_keep)))
    kernel = dout_peer ? fused_bwd_kernel<false, true, true>(C, &smem) : fused_bwd_kernel<false, false, true>(C, &smem);
  if (!kernel || N == 0) return false;
  const int n_chunks = ceil_div(N, kFusedRows);
  float* partial_dw = static_cast<float*>(scratch.get(static_cast<size_t>(n_chunks) * C * sizeof(float), stream));
  kernel<<<n_chunks, kThreads, smem, stream>>>(din_accum, din_keep, partial_dw, nullptr, nullptr, dout, dout_peer, in,
                                               w, nullptr, rstd, N, C, release);
  CUDA_CHECK_LAUNCH("layernorm_bwd_fused_kernel (RMSNorm)");
  add_column_partials(dw, partial_dw, n_chunks, C, stream);
  return true;
}

}  // namespace trident::gpu
