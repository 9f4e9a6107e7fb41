// Causal flash attention on tensor cores for head sizes 64 and 128: the FlashAttention-2 structure
// of attention.cu with every product on bf16 mma.sync fragments and fp32 accumulators.
#include "attention.cuh"
#include "attention_mma.cuh"
#include "mma.cuh"

namespace trident::gpu {
namespace {

// A block is 4 warps and each warp owns 16 rows (one mma row block), so a block owns 64 query
// rows (forward, dQ) or 64 key rows (dK, dV). The other side streams through shared memory in
// tiles, double-buffered: cp.async fills the next tile while the tensor cores work on this one.
// Backward keeps the generic split, so no output has two writers and nothing needs atomics:
// one kernel over key blocks for dK, dV and one over query blocks for dQ, both recomputing
// P = exp(s - lse) from the forward's lse.
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kWarpRows = 16;
constexpr int kBlockRows = kWarps * kWarpRows;
constexpr int kKeyTile = 64;  // keys per step of the forward and dQ kernels
constexpr int kKeyTiles8 = kKeyTile / 8;
// Shared-memory rows carry 16 bytes of padding: a row stride of an odd number of 16-byte units
// puts the 8 row addresses of an ldmatrix phase into 8 different bank groups.
constexpr int kPad = 8;
constexpr float kLog2e = 1.4426950408889634f;
// Query blocks start at multiples of kBlockRows and key tiles at multiples of kKeyTile: every
// key tile a query block streams starts at or before the block's first query, and the last
// one is the only tile that crosses the diagonal.
static_assert(kKeyTile == kBlockRows, "the forward and dQ kernels assume square diagonal tiles");

template <int HS>
constexpr int row_stride_smem() {
  return HS + kPad;
}

// Queries per step of the dK/dV kernel. Its two (16, HS) fp32 accumulators take 128 registers
// per thread at HS = 128, so the score tiles are halved there to stay clear of spills.
template <int HS>
constexpr int dkv_query_tile() {
  return HS == 128 ? 32 : 64;
}

// Copies rows [row0, row0 + kRows) of a (T, HS) matrix whose rows lie row_stride elements apart
// into shared memory, asynchronously; rows past T become zeros.
template <int HS, int kRows>
__device__ __forceinline__ void load_tile(bf16* dst, const bf16* src, size_t row_stride, int row0, int T) {
  constexpr int kChunks = HS / 8;  // 16-byte pieces per row
  static_assert(kRows * kChunks % kThreads == 0, "every thread copies the same number of pieces");
#pragma unroll
  for (int it = 0; it < kRows * kChunks / kThreads; ++it) {
    const int i = threadIdx.x + it * kThreads, r = i / kChunks, c = i % kChunks, t = row0 + r;
    const bool valid = t < T;
    cp_async_16(dst + r * row_stride_smem<HS>() + c * 8,
                src + (valid ? static_cast<size_t>(t) * row_stride : 0) + c * 8, valid);
  }
}

// Copies floats [row0, row0 + kRows) of a (T) vector asynchronously; zeros past T.
template <int kRows>
__device__ __forceinline__ void load_vector(float* dst, const float* src, int row0, int T) {
  for (int i = threadIdx.x; i < kRows; i += kThreads) {
    const bool valid = row0 + i < T;
    cp_async_4(dst + i, src + (valid ? row0 + i : 0), valid);
  }
}

// A operand: rows [row0, row0 + 16) x columns [col0, col0 + 16) of a row-major tile.
template <int kStride>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16* tile, int row0, int col0, int lane) {
  ldmatrix_x4(a, tile + (row0 + lane % 16) * kStride + col0 + (lane / 16) * 8);
}

// B operands of two n8 tiles, B[k][n] = tile[n][k] for n in [n0, n0 + 16), k in [k0, k0 + 16)
// (the tile holds one row per n): b[0], b[1] serve n0..n0+7 and b[2], b[3] serve n0+8..n0+15.
template <int kStride>
__device__ __forceinline__ void load_b_rows_n(uint32_t (&b)[4], const bf16* tile, int n0, int k0, int lane) {
  ldmatrix_x4(b, tile + (n0 + lane % 8 + (lane / 16) * 8) * kStride + k0 + ((lane / 8) % 2) * 8);
}

// As load_b_rows_n with B[k][n] = tile[k][n] (the tile holds one row per k).
template <int kStride>
__device__ __forceinline__ void load_b_rows_k(uint32_t (&b)[4], const bf16* tile, int k0, int n0, int lane) {
  ldmatrix_x4_trans(b, tile + (k0 + lane % 8 + ((lane / 8) % 2) * 8) * kStride + n0 + (lane / 16) * 8);
}

// acc (16, 8 kNTiles) += A B^T: A = rows [a_row0, a_row0 + 16) of a_tile, B = the first
// 8 kNTiles rows of b_tile, both HS wide (scores q k^T and their gradients dout v^T).
template <int HS, int kNTiles>
__device__ __forceinline__ void mma_rows_rows(float (&acc)[kNTiles][4], const bf16* a_tile, int a_row0,
                                              const bf16* b_tile, int lane) {
  constexpr int kStride = row_stride_smem<HS>();
#pragma unroll
  for (int kk = 0; kk < HS / 16; ++kk) {
    uint32_t a[4];
    load_a<kStride>(a, a_tile, a_row0, kk * 16, lane);
#pragma unroll
    for (int np = 0; np < kNTiles / 2; ++np) {
      uint32_t b[4];
      load_b_rows_n<kStride>(b, b_tile, np * 16, kk * 16, lane);
      mma_bf16_16816(acc[2 * np], a, b[0], b[1]);
      mma_bf16_16816(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// acc (16, HS) += P (16, 8 kKTiles) tile: P is an fp32 accumulator of this warp, rounded to
// bf16 here; tile holds 8 kKTiles rows of HS (values, dout, queries or keys).
template <int HS, int kKTiles>
__device__ __forceinline__ void mma_probs_rows(float (&acc)[HS / 8][4], const float (&p)[kKTiles][4], const bf16* tile,
                                               int lane) {
  constexpr int kStride = row_stride_smem<HS>();
#pragma unroll
  for (int kk = 0; kk < kKTiles / 2; ++kk) {
    // The accumulator layout of two n8 tiles is the A layout of one k16 slice.
    const uint32_t a[4] = {pack_bf16x2(p[2 * kk][0], p[2 * kk][1]), pack_bf16x2(p[2 * kk][2], p[2 * kk][3]),
                           pack_bf16x2(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                           pack_bf16x2(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < HS / 16; ++dp) {
      uint32_t b[4];
      load_b_rows_k<kStride>(b, tile, kk * 16, dp * 16, lane);
      mma_bf16_16816(acc[2 * dp], a, b[0], b[1]);
      mma_bf16_16816(acc[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

// Writes a warp's (16, HS) accumulator, row r scaled by factor[r / 8], as bf16 to rows
// [row0, row0 + 16) of dst (rows dst_stride elements apart; rows >= T are skipped). The rows go
// through this warp's own 16 rows of shared memory (`stage`, free by now) so that the global
// stores are 16 bytes wide.
template <int HS>
__device__ __forceinline__ void store_rows(bf16* dst, size_t dst_stride, int row0, int T, const float (&acc)[HS / 8][4],
                                           const float (&factor)[2], bf16* stage, int lane) {
  constexpr int kStride = row_stride_smem<HS>(), kChunks = HS / 8;
  __syncwarp();  // the warp's fragment loads from `stage` are done
#pragma unroll
  for (int dt = 0; dt < HS / 8; ++dt) {
    const int col = dt * 8 + (lane % 4) * 2;
#pragma unroll
    for (int r = 0; r < 2; ++r)
      *reinterpret_cast<__nv_bfloat162*>(stage + (lane / 4 + 8 * r) * kStride + col) =
          __floats2bfloat162_rn(acc[dt][2 * r] * factor[r], acc[dt][2 * r + 1] * factor[r]);
  }
  __syncwarp();
#pragma unroll
  for (int it = 0; it < kWarpRows * kChunks / 32; ++it) {
    const int i = lane + it * 32, r = i / kChunks, c = i % kChunks;
    if (row0 + r < T)
      *reinterpret_cast<uint4*>(dst + static_cast<size_t>(row0 + r) * dst_stride + c * 8) =
          *reinterpret_cast<const uint4*>(stage + r * kStride + c * 8);
  }
}

// Causal work grows with the query index: the last query blocks go first so that the longest
// blocks do not start in the final wave.
__device__ __forceinline__ int query_block_start() { return (gridDim.y - 1 - blockIdx.y) * kBlockRows; }

template <int HS>
constexpr size_t fwd_smem_bytes() {
  return static_cast<size_t>(kBlockRows + 4 * kKeyTile) * row_stride_smem<HS>() * sizeof(bf16);
}

template <int HS>
__global__ void __launch_bounds__(kThreads)
    attention_fwd_mma_kernel(bf16* out, float* lse, const bf16* qkv, int T, int NH, float scale) {
  constexpr int kStride = row_stride_smem<HS>(), kTileElems = kKeyTile * kStride;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);  // (kBlockRows, kStride)
  bf16* kv_s = q_s + kBlockRows * kStride;        // 2 stages of K (kKeyTile, kStride), V (kKeyTile, kStride)

  const int b = blockIdx.x / NH, h = blockIdx.x % NH;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int q0 = query_block_start();
  const int n_tiles = (min(T, q0 + kBlockRows) - 1) / kKeyTile + 1;
  const size_t row_stride = 3 * static_cast<size_t>(NH) * HS;
  const bf16* keys = qkv + qkv_offset(b, h, 1, T, NH, HS);
  const bf16* values = qkv + qkv_offset(b, h, 2, T, NH, HS);
  load_tile<HS, kBlockRows>(q_s, qkv + qkv_offset(b, h, 0, T, NH, HS), row_stride, q0, T);
  load_tile<HS, kKeyTile>(kv_s, keys, row_stride, 0, T);
  load_tile<HS, kKeyTile>(kv_s + kTileElems, values, row_stride, 0, T);
  cp_async_commit();

  // This lane's accumulator elements 0, 1 belong to query row_lo, elements 2, 3 to row_lo + 8.
  const int row_lo = q0 + warp * kWarpRows + lane / 4;
  const float scale_log2 = scale * kLog2e;
  float o[HS / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // running max (raw score) and sum
  for (int j = 0; j < n_tiles; ++j) {
    cp_async_wait_all();
    __syncthreads();  // tile j is visible to every warp, and every warp is done with tile j - 1
    if (j + 1 < n_tiles) {
      bf16* next = kv_s + ((j + 1) % 2) * 2 * kTileElems;
      load_tile<HS, kKeyTile>(next, keys, row_stride, (j + 1) * kKeyTile, T);
      load_tile<HS, kKeyTile>(next + kTileElems, values, row_stride, (j + 1) * kKeyTile, T);
      cp_async_commit();
    }
    const bf16* k_s = kv_s + (j % 2) * 2 * kTileElems;

    float s[kKeyTiles8][4] = {};
    mma_rows_rows<HS, kKeyTiles8>(s, q_s, warp * kWarpRows, k_s, lane);
    const int k0 = j * kKeyTile;
    if (k0 + kKeyTile - 1 > q0 + warp * kWarpRows) {  // the diagonal tile: hide later keys (and keys >= T)
#pragma unroll
      for (int nt = 0; nt < kKeyTiles8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (k0 + nt * 8 + (lane % 4) * 2 + e % 2 > row_lo + 8 * (e / 2)) s[nt][e] = -INFINITY;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kKeyTiles8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      // The four lanes of a row group share the row.
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
      const float m_new = fmaxf(m[r], mx);  // finite: every row sees the first key of every tile
      const float correction = exp2f((m[r] - m_new) * scale_log2);
      const float offset = m_new * scale_log2;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kKeyTiles8; ++nt)
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          s[nt][e] = exp2f(fmaf(s[nt][e], scale_log2, -offset));
          sum += s[nt][e];
        }
      l[r] = l[r] * correction + sum;  // this lane's share of the row; summed over the group at the end
#pragma unroll
      for (int dt = 0; dt < HS / 8; ++dt) {
        o[dt][2 * r] *= correction;
        o[dt][2 * r + 1] *= correction;
      }
      m[r] = m_new;
    }
    mma_probs_rows<HS, kKeyTiles8>(o, s, k_s + kTileElems, lane);
  }

  float inv_l[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(kFullMask, l[r], 1);
    l[r] += __shfl_xor_sync(kFullMask, l[r], 2);
    inv_l[r] = 1.0f / l[r];
  }
  store_rows<HS>(out + head_offset(b, h, T, NH, HS), static_cast<size_t>(NH) * HS, q0 + warp * kWarpRows, T, o, inv_l,
                 q_s + warp * kWarpRows * kStride, lane);
  if (lane % 4 == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int qi = row_lo + 8 * r;
      if (qi < T) lse[static_cast<size_t>(blockIdx.x) * T + qi] = m[r] * scale + logf(l[r]);
    }
  }
}

template <int HS>
constexpr size_t dkv_smem_bytes() {
  constexpr int kQTile = dkv_query_tile<HS>();
  return static_cast<size_t>(2 * kBlockRows + 4 * kQTile) * row_stride_smem<HS>() * sizeof(bf16) +
         4 * kQTile * sizeof(float);
}

// dK, dV of the 64 keys of this block, streaming the queries that see them.
template <int HS>
__global__ void __launch_bounds__(kThreads)
    attention_dkv_mma_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* delta, int T,
                             int NH, float scale) {
  constexpr int kStride = row_stride_smem<HS>(), kQTile = dkv_query_tile<HS>(), kQTiles8 = kQTile / 8;
  constexpr int kStageElems = 2 * kQTile * kStride;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* k_s = reinterpret_cast<bf16*>(smem_raw);                       // (kBlockRows, kStride)
  bf16* v_s = k_s + kBlockRows * kStride;                              // (kBlockRows, kStride)
  bf16* qdo_s = v_s + kBlockRows * kStride;                            // 2 stages of Q, dout (kQTile, kStride)
  float* stats_s = reinterpret_cast<float*>(qdo_s + 2 * kStageElems);  // 2 stages of lse, delta (kQTile)

  const int b = blockIdx.x / NH, h = blockIdx.x % NH;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k0 = blockIdx.y * kBlockRows;  // early keys see the most queries and go first
  const size_t row_stride = 3 * static_cast<size_t>(NH) * HS, dout_stride = static_cast<size_t>(NH) * HS;
  const bf16* queries = qkv + qkv_offset(b, h, 0, T, NH, HS);
  const bf16* grads = dout + head_offset(b, h, T, NH, HS);
  const float* lse_bh = lse + static_cast<size_t>(blockIdx.x) * T;
  const float* delta_bh = delta + static_cast<size_t>(blockIdx.x) * T;
  auto load_queries = [&](int stage, int q0) {
    bf16* dst = qdo_s + stage * kStageElems;
    load_tile<HS, kQTile>(dst, queries, row_stride, q0, T);
    load_tile<HS, kQTile>(dst + kQTile * kStride, grads, dout_stride, q0, T);
    load_vector<kQTile>(stats_s + stage * 2 * kQTile, lse_bh, q0, T);
    load_vector<kQTile>(stats_s + stage * 2 * kQTile + kQTile, delta_bh, q0, T);
    cp_async_commit();
  };
  load_tile<HS, kBlockRows>(k_s, qkv + qkv_offset(b, h, 1, T, NH, HS), row_stride, k0, T);
  load_tile<HS, kBlockRows>(v_s, qkv + qkv_offset(b, h, 2, T, NH, HS), row_stride, k0, T);
  // Query tiles start at k0: earlier queries do not see these keys.
  load_queries(0, k0);

  // This lane's accumulator elements 0, 1 belong to key key_lo, elements 2, 3 to key_lo + 8;
  // element e of n8 tile nt is query q0 + 8 nt + 2 (lane % 4) + e % 2.
  const int key_lo = k0 + warp * kWarpRows + lane / 4;
  const float scale_log2 = scale * kLog2e;
  const int n_tiles = (T - k0 + kQTile - 1) / kQTile;
  float dk[HS / 8][4] = {}, dv[HS / 8][4] = {};
  for (int j = 0; j < n_tiles; ++j) {
    const int q0 = k0 + j * kQTile;
    cp_async_wait_all();
    __syncthreads();  // tile j is visible to every warp, and every warp is done with tile j - 1
    if (j + 1 < n_tiles) load_queries((j + 1) % 2, q0 + kQTile);
    const bf16* q_s = qdo_s + (j % 2) * kStageElems;
    const bf16* do_s = q_s + kQTile * kStride;
    const float* lse_s = stats_s + (j % 2) * 2 * kQTile;
    const float* delta_s = lse_s + kQTile;

    float p[kQTiles8][4] = {}, ds[kQTiles8][4] = {};
    mma_rows_rows<HS, kQTiles8>(p, k_s, warp * kWarpRows, q_s, lane);    // s^T = K Q^T
    mma_rows_rows<HS, kQTiles8>(ds, v_s, warp * kWarpRows, do_s, lane);  // dp^T = V dout^T
    const bool edge = q0 < k0 + kBlockRows || q0 + kQTile > T;           // queries before a key, or past T
#pragma unroll
    for (int nt = 0; nt < kQTiles8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qc = nt * 8 + (lane % 4) * 2 + e % 2, qi = q0 + qc;
        float pe = exp2f(fmaf(p[nt][e], scale_log2, -lse_s[qc] * kLog2e));
        if (edge && (qi < key_lo + 8 * (e / 2) || qi >= T)) pe = 0.0f;
        p[nt][e] = pe;
        ds[nt][e] = pe * (ds[nt][e] - delta_s[qc]);
      }
    mma_probs_rows<HS, kQTiles8>(dv, p, do_s, lane);  // dV += P^T dout
    mma_probs_rows<HS, kQTiles8>(dk, ds, q_s, lane);  // dK += dS^T Q
  }

  const float dk_factor[2] = {scale, scale}, dv_factor[2] = {1.0f, 1.0f};
  store_rows<HS>(dqkv + qkv_offset(b, h, 1, T, NH, HS), row_stride, k0 + warp * kWarpRows, T, dk, dk_factor,
                 k_s + warp * kWarpRows * kStride, lane);
  store_rows<HS>(dqkv + qkv_offset(b, h, 2, T, NH, HS), row_stride, k0 + warp * kWarpRows, T, dv, dv_factor,
                 v_s + warp * kWarpRows * kStride, lane);
}

template <int HS>
constexpr size_t dq_smem_bytes() {
  return static_cast<size_t>(2 * kBlockRows + 4 * kKeyTile) * row_stride_smem<HS>() * sizeof(bf16);
}

// dQ of the 64 queries of this block, streaming the keys they see.
template <int HS>
__global__ void __launch_bounds__(kThreads)
    attention_dq_mma_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* delta, int T,
                            int NH, float scale) {
  constexpr int kStride = row_stride_smem<HS>(), kTileElems = kKeyTile * kStride;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);  // (kBlockRows, kStride)
  bf16* do_s = q_s + kBlockRows * kStride;        // (kBlockRows, kStride)
  bf16* kv_s = do_s + kBlockRows * kStride;       // 2 stages of K (kKeyTile, kStride), V (kKeyTile, kStride)

  const int b = blockIdx.x / NH, h = blockIdx.x % NH;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int q0 = query_block_start();
  const int n_tiles = (min(T, q0 + kBlockRows) - 1) / kKeyTile + 1;
  const size_t row_stride = 3 * static_cast<size_t>(NH) * HS;
  const bf16* keys = qkv + qkv_offset(b, h, 1, T, NH, HS);
  const bf16* values = qkv + qkv_offset(b, h, 2, T, NH, HS);
  load_tile<HS, kBlockRows>(q_s, qkv + qkv_offset(b, h, 0, T, NH, HS), row_stride, q0, T);
  load_tile<HS, kBlockRows>(do_s, dout + head_offset(b, h, T, NH, HS), static_cast<size_t>(NH) * HS, q0, T);
  load_tile<HS, kKeyTile>(kv_s, keys, row_stride, 0, T);
  load_tile<HS, kKeyTile>(kv_s + kTileElems, values, row_stride, 0, T);
  cp_async_commit();

  // This lane's accumulator elements 0, 1 belong to query row_lo, elements 2, 3 to row_lo + 8.
  const int row_lo = q0 + warp * kWarpRows + lane / 4;
  const float scale_log2 = scale * kLog2e;
  float row_lse[2], row_delta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int qi = row_lo + 8 * r;
    row_lse[r] = qi < T ? lse[static_cast<size_t>(blockIdx.x) * T + qi] * kLog2e : 0.0f;
    row_delta[r] = qi < T ? delta[static_cast<size_t>(blockIdx.x) * T + qi] : 0.0f;
  }

  float dq[HS / 8][4] = {};
  for (int j = 0; j < n_tiles; ++j) {
    cp_async_wait_all();
    __syncthreads();  // tile j is visible to every warp, and every warp is done with tile j - 1
    if (j + 1 < n_tiles) {
      bf16* next = kv_s + ((j + 1) % 2) * 2 * kTileElems;
      load_tile<HS, kKeyTile>(next, keys, row_stride, (j + 1) * kKeyTile, T);
      load_tile<HS, kKeyTile>(next + kTileElems, values, row_stride, (j + 1) * kKeyTile, T);
      cp_async_commit();
    }
    const bf16* k_s = kv_s + (j % 2) * 2 * kTileElems;

    float p[kKeyTiles8][4] = {}, ds[kKeyTiles8][4] = {};
    mma_rows_rows<HS, kKeyTiles8>(p, q_s, warp * kWarpRows, k_s, lane);                 // s = Q K^T
    mma_rows_rows<HS, kKeyTiles8>(ds, do_s, warp * kWarpRows, k_s + kTileElems, lane);  // dp = dout V^T
    const int k0 = j * kKeyTile;
    const bool diagonal = k0 + kKeyTile - 1 > q0 + warp * kWarpRows;
#pragma unroll
    for (int nt = 0; nt < kKeyTiles8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        float pe = exp2f(fmaf(p[nt][e], scale_log2, -row_lse[r]));
        if (diagonal && k0 + nt * 8 + (lane % 4) * 2 + e % 2 > row_lo + 8 * r) pe = 0.0f;
        ds[nt][e] = pe * (ds[nt][e] - row_delta[r]);
      }
    mma_probs_rows<HS, kKeyTiles8>(dq, ds, k_s, lane);  // dQ += dS K
  }

  const float factor[2] = {scale, scale};
  store_rows<HS>(dqkv + qkv_offset(b, h, 0, T, NH, HS), row_stride, q0 + warp * kWarpRows, T, dq, factor,
                 q_s + warp * kWarpRows * kStride, lane);
}

// Kernels with more than 48 KiB of dynamic shared memory must ask for it first.
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

template <int HS>
void launch_fwd(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, float scale, cudaStream_t stream) {
  const auto kernel = attention_fwd_mma_kernel<HS>;
  allow_smem(kernel, fwd_smem_bytes<HS>());
  kernel<<<dim3(B * NH, ceil_div(T, kBlockRows)), kThreads, fwd_smem_bytes<HS>(), stream>>>(out, lse, qkv, T, NH,
                                                                                            scale);
  CUDA_CHECK_LAUNCH("attention_fwd_mma_kernel");
}

template <int HS>
void launch_bwd(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* delta, int B, int T,
                int NH, float scale, cudaStream_t stream) {
  const dim3 grid(B * NH, ceil_div(T, kBlockRows));
  const auto dkv = attention_dkv_mma_kernel<HS>;
  allow_smem(dkv, dkv_smem_bytes<HS>());
  dkv<<<grid, kThreads, dkv_smem_bytes<HS>(), stream>>>(dqkv, dout, qkv, lse, delta, T, NH, scale);
  CUDA_CHECK_LAUNCH("attention_dkv_mma_kernel");
  const auto dq = attention_dq_mma_kernel<HS>;
  allow_smem(dq, dq_smem_bytes<HS>());
  dq<<<grid, kThreads, dq_smem_bytes<HS>(), stream>>>(dqkv, dout, qkv, lse, delta, T, NH, scale);
  CUDA_CHECK_LAUNCH("attention_dq_mma_kernel");
}

}  // namespace

bool attention_mma_supported(int HS, std::initializer_list<const void*> tensors) {
  if (HS != 64 && HS != 128) return false;
  for (const void* p : tensors)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

void attention_fwd_mma(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, int HS, cudaStream_t stream) {
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  if (HS == 64) {
    launch_fwd<64>(out, lse, qkv, B, T, NH, scale, stream);
  } else {
    launch_fwd<128>(out, lse, qkv, B, T, NH, scale, stream);
  }
}

void attention_bwd_mma(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* delta, int B,
                       int T, int NH, int HS, cudaStream_t stream) {
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  if (HS == 64) {
    launch_bwd<64>(dqkv, dout, qkv, lse, delta, B, T, NH, scale, stream);
  } else {
    launch_bwd<128>(dqkv, dout, qkv, lse, delta, B, T, NH, scale, stream);
  }
}

}  // namespace trident::gpu
