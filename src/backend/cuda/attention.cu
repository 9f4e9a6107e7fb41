// Causal flash-attention kernels for any head size up to 128: FlashAttention-2 structure with
// fp32 SIMT math on bf16 tiles in shared memory. Head sizes 64 and 128 go to the tensor-core
// kernels of attention_mma.cu instead; these remain the path for every other shape.
#include <cstdint>

#include "attention.cuh"
#include "attention_mma.cuh"
#include "reduce.cuh"
#include "rope.cuh"

namespace trident::gpu {
namespace {

// A block owns kRows query rows (forward, dQ) of one (b, query head) or key rows (dK, dV) of one
// (b, key/value head); the other side streams through shared memory in tiles of kTile rows, lane
// j of a warp scoring row j of the tile. Backward: D = rowsum(dout * out) first, then one kernel
// over key blocks for dK, dV (streaming the queries of every query head of the key's group in
// turn) and one over query blocks for dQ, both recomputing P = exp(s - lse), so no output has two
// writers and nothing needs atomics.

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRowsPerWarp = 4;
constexpr int kRows = kWarps * kRowsPerWarp;  // rows owned by one block
constexpr int kTile = 32;                     // streamed rows per step, one per lane
constexpr int kDimsPerLane = kMaxHeadSize / 32;
// Query blocks start at multiples of kRows and key tiles at multiples of kTile, so every key
// tile a query block streams starts at or before the block's first query.
static_assert(kTile % kRows == 0, "key tiles must align with query blocks");

// Shared-memory row stride in bf16 elements: even, so rows are read as bf16 pairs, and an odd
// number of 4-byte words, so 32 lanes reading 32 rows at one column hit 32 different banks.
__host__ __device__ int smem_stride(int HS) {
  int s = HS + (HS & 1);
  if ((s / 2) % 2 == 0) s += 2;
  return s;
}

// Where the rows t = 0..T-1 of one (b, h) live: element (t, d) is at base[t * row_stride + d].
struct Rows {
  const bf16* base;
  size_t row_stride;
};

// Copies rows [row0, row0 + n_rows) into shared memory; rows past T become zeros.
__device__ void load_rows(bf16* dst, int stride, Rows src, int row0, int n_rows, int T, int HS) {
  for (int idx = threadIdx.x; idx < n_rows * HS; idx += blockDim.x) {
    const int r = idx / HS, d = idx - r * HS, t = row0 + r;
    dst[r * stride + d] = t < T ? src.base[static_cast<size_t>(t) * src.row_stride + d] : to_bf16(0.0f);
  }
}

// Loads floats [row0, row0 + n) of a (T) vector; zeros past T.
__device__ void load_vector(float* dst, const float* src, int row0, int n, int T) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = row0 + i < T ? src[row0 + i] : 0.0f;
}

// Dot product of two shared-memory rows (both start on a 4-byte boundary: even strides).
__device__ __forceinline__ float dot_rows(const bf16* a, const bf16* b, int HS) {
  const __nv_bfloat162* a2 = reinterpret_cast<const __nv_bfloat162*>(a);
  const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(b);
  float even = 0.0f, odd = 0.0f;
  for (int i = 0; i < HS / 2; ++i) {
    const float2 x = __bfloat1622float2(a2[i]), y = __bfloat1622float2(b2[i]);
    even = fmaf(x.x, y.x, even);
    odd = fmaf(x.y, y.y, odd);
  }
  if (HS & 1) even = fmaf(to_float(a[HS - 1]), to_float(b[HS - 1]), even);
  return even + odd;
}

// acc[i] += coef * row[lane + 32 i] for the dimensions this lane owns.
__device__ __forceinline__ void axpy_row(float (&acc)[kDimsPerLane], float coef, const bf16* row, int lane, int HS) {
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < HS) acc[i] = fmaf(coef, to_float(row[d]), acc[i]);
  }
}

// dst[lane + 32 i] = acc[i] * factor for the dimensions this lane owns.
__device__ __forceinline__ void store_row(bf16* dst, const float (&acc)[kDimsPerLane], float factor, int lane, int HS) {
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < HS) dst[d] = to_bf16(acc[i] * factor);
  }
}

// Causal work grows with the query index: the last query blocks go first so that the longest
// blocks do not start in the final wave.
__device__ __forceinline__ int query_block_start() { return (gridDim.y - 1 - blockIdx.y) * kRows; }

// The first key of query qi: its document's start with docs (this sequence's doc_start), else 0.
__device__ __forceinline__ int first_key(const int32_t* docs, int qi) { return docs ? docs[qi] : 0; }

// docs (packed sequences): key tiles before the block's first document are skipped, and a row
// skips the tiles before its own document, so every tile it scores holds a key it sees.
__global__ void __launch_bounds__(kThreads)
    attention_fwd_kernel(bf16* out, float* lse, const bf16* qkv, const int32_t* doc_start, int T, int NH, int NKV,
                         int HS, float scale) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int stride = smem_stride(HS);
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);  // (kRows, stride)
  bf16* k_s = q_s + kRows * stride;               // (kTile, stride)
  bf16* v_s = k_s + kTile * stride;               // (kTile, stride)

  const int b = blockIdx.x / NH, h = blockIdx.x % NH, kvh = h / (NH / NKV);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int q0 = query_block_start();
  const size_t row_stride = qkv_row_stride(NH, NKV, HS);
  load_rows(q_s, stride, Rows{qkv + qkv_offset(b, h, 0, T, NH, NKV, HS), row_stride}, q0, kRows, T, HS);
  const Rows keys{qkv + qkv_offset(b, kvh, 1, T, NH, NKV, HS), row_stride};
  const Rows values{qkv + qkv_offset(b, kvh, 2, T, NH, NKV, HS), row_stride};

  float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][kDimsPerLane];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) o[r][i] = 0.0f;
  }

  const int32_t* docs = doc_start ? doc_start + static_cast<size_t>(b) * T : nullptr;
  const int q_last = min(T, q0 + kRows) - 1;
  for (int k0 = first_key(docs, q0) / kTile * kTile; k0 <= q_last; k0 += kTile) {
    __syncthreads();  // every warp is done with the previous tile (and q_s is loaded)
    load_rows(k_s, stride, keys, k0, kTile, T, HS);
    load_rows(v_s, stride, values, k0, kTile, T, HS);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int qr = warp * kRowsPerWarp + r, qi = q0 + qr;
      if (qi >= T) continue;  // warp-uniform
      const int first = first_key(docs, qi);
      if (k0 + kTile <= first) continue;  // warp-uniform: the tile precedes the row's document
      const int kj = k0 + lane;
      const bool visible = kj <= qi && kj >= first;
      const float s = visible ? scale * dot_rows(q_s + qr * stride, k_s + lane * stride, HS) : -INFINITY;
      const float m_new = fmaxf(m[r], warp_max(s));  // finite: key max(k0, first) <= qi is visible
      const float p = visible ? expf(s - m_new) : 0.0f;
      const float correction = expf(m[r] - m_new);
      l[r] = l[r] * correction + warp_sum(p);
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) o[r][i] *= correction;
      const int n_keys = min(kTile, qi - k0 + 1);
      for (int j = max(0, first - k0); j < n_keys; ++j)
        axpy_row(o[r], __shfl_sync(kFullMask, p, j), v_s + j * stride, lane, HS);
      m[r] = m_new;
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int qi = q0 + warp * kRowsPerWarp + r;
    if (qi >= T) continue;
    store_row(out + head_offset(b, h, T, NH, HS) + static_cast<size_t>(qi) * NH * HS, o[r], 1.0f / l[r], lane, HS);
    if (lane == 0) lse[static_cast<size_t>(blockIdx.x) * T + qi] = m[r] + logf(l[r]);
  }
}

// delta (B,NH,T) = rowsum(dout * out): one warp per (b, t, h) row.
__global__ void attention_delta_kernel(float* delta, const bf16* dout, const bf16* out, int B, int T, int NH, int HS) {
  const size_t row = static_cast<size_t>(blockIdx.x) * kWarps + threadIdx.x / 32;  // ((b*T) + t)*NH + h
  const int lane = threadIdx.x % 32;
  if (row >= static_cast<size_t>(B) * T * NH) return;
  float s = 0.0f;
  for (int d = lane; d < HS; d += 32) s += to_float(dout[row * HS + d]) * to_float(out[row * HS + d]);
  s = warp_sum(s);
  const int h = static_cast<int>(row % NH);
  const size_t bt = row / NH;
  const int t = static_cast<int>(bt % T), b = static_cast<int>(bt / T);
  if (lane == 0) delta[(static_cast<size_t>(b) * NH + h) * T + t] = s;
}

// The same for HS = 8 kLanes with 16-byte aligned rows: kLanes adjacent threads share a row, one
// 16-byte piece of dout and out each, so a warp reads 32 consecutive pieces of both.
template <int kLanes>
__global__ void attention_delta_vec_kernel(float* delta, const bf16* dout, const bf16* out, int B, int T, int NH) {
  constexpr int HS = kLanes * kVec;
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t row = i / kLanes, rows = static_cast<size_t>(B) * T * NH;  // row = ((b*T) + t)*NH + h
  float s = 0.0f;
  if (row < rows) {
    float g[kVec], o[kVec];
    load_vec(g, dout + i * kVec);
    load_vec(o, out + i * kVec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) s += g[k] * o[k];
  }
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) s += __shfl_xor_sync(kFullMask, s, offset);
  if (row < rows && i % kLanes == 0) {
    const int h = static_cast<int>(row % NH);
    const size_t bt = row / NH;
    const int t = static_cast<int>(bt % T), b = static_cast<int>(bt / T);
    delta[(static_cast<size_t>(b) * NH + h) * T + t] = s;
  }
  static_assert(HS % kVec == 0 && 32 % kLanes == 0, "a row's pieces stay inside one warp");
}

// dK, dV of the kRows keys of this block, streaming the queries that see them: those of each
// query head of the group in turn, so each key's sum over the group has one order. With docs,
// the query tiles end at the first that starts in a document after the block's last key.
__global__ void __launch_bounds__(kThreads)
    attention_dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* delta,
                         const int32_t* doc_start, int T, int NH, int NKV, int HS, float scale) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int stride = smem_stride(HS);
  bf16* k_s = reinterpret_cast<bf16*>(smem_raw);                   // (kRows, stride)
  bf16* v_s = k_s + kRows * stride;                                // (kRows, stride)
  bf16* q_s = v_s + kRows * stride;                                // (kTile, stride)
  bf16* do_s = q_s + kTile * stride;                               // (kTile, stride)
  float* lse_s = reinterpret_cast<float*>(do_s + kTile * stride);  // (kTile)
  float* delta_s = lse_s + kTile;                                  // (kTile)

  const int b = blockIdx.x / NKV, kvh = blockIdx.x % NKV, group = NH / NKV;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k0 = blockIdx.y * kRows;  // early keys see the most queries and go first
  // Query tiles start at k0: earlier queries do not see these keys, and the first tile holds
  // every key's own query (kRows <= kTile).
  const size_t row_stride = qkv_row_stride(NH, NKV, HS);
  load_rows(k_s, stride, Rows{qkv + qkv_offset(b, kvh, 1, T, NH, NKV, HS), row_stride}, k0, kRows, T, HS);
  load_rows(v_s, stride, Rows{qkv + qkv_offset(b, kvh, 2, T, NH, NKV, HS), row_stride}, k0, kRows, T, HS);

  float dk[kRowsPerWarp][kDimsPerLane] = {}, dv[kRowsPerWarp][kDimsPerLane] = {};
  // The query tiles of each query head of the group in turn.
  const int32_t* docs = doc_start ? doc_start + static_cast<size_t>(b) * T : nullptr;
  int n_tiles = (T - k0 + kTile - 1) / kTile;  // per query head
  if (docs) {
    const int k_last = min(T, k0 + kRows) - 1;
    int n = 0;
    while (n < n_tiles && docs[k0 + n * kTile] <= k_last) ++n;
    n_tiles = n;
  }
  for (int i = 0; i < group * n_tiles; ++i) {
    const int h = kvh * group + i / n_tiles, q0 = k0 + (i % n_tiles) * kTile;
    const size_t bh = static_cast<size_t>(b) * NH + h;
    __syncthreads();
    load_rows(q_s, stride, Rows{qkv + qkv_offset(b, h, 0, T, NH, NKV, HS), row_stride}, q0, kTile, T, HS);
    load_rows(do_s, stride, Rows{dout + head_offset(b, h, T, NH, HS), static_cast<size_t>(NH) * HS}, q0, kTile, T, HS);
    load_vector(lse_s, lse + bh * T, q0, kTile, T);
    load_vector(delta_s, delta + bh * T, q0, kTile, T);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int kr = warp * kRowsPerWarp + r, kj = k0 + kr;
      if (kj >= T) continue;  // warp-uniform
      const int qi = q0 + lane;
      float p = 0.0f, ds = 0.0f;
      if (qi < T && qi >= kj && first_key(docs, qi) <= kj) {
        const float s = scale * dot_rows(q_s + lane * stride, k_s + kr * stride, HS);
        p = expf(s - lse_s[lane]);
        const float dp = dot_rows(do_s + lane * stride, v_s + kr * stride, HS);
        ds = p * (dp - delta_s[lane]);
      }
      const int j_end = min(kTile, T - q0);
      for (int j = max(0, kj - q0); j < j_end; ++j) {
        axpy_row(dv[r], __shfl_sync(kFullMask, p, j), do_s + j * stride, lane, HS);
        axpy_row(dk[r], __shfl_sync(kFullMask, ds, j), q_s + j * stride, lane, HS);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int kj = k0 + warp * kRowsPerWarp + r;
    if (kj >= T) continue;
    const size_t t_off = static_cast<size_t>(kj) * row_stride;
    store_row(dqkv + qkv_offset(b, kvh, 1, T, NH, NKV, HS) + t_off, dk[r], scale, lane, HS);
    store_row(dqkv + qkv_offset(b, kvh, 2, T, NH, NKV, HS) + t_off, dv[r], 1.0f, lane, HS);
  }
}

// dQ of the kRows queries of this block, streaming the keys they see.
__global__ void __launch_bounds__(kThreads)
    attention_dq_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* delta,
                        const int32_t* doc_start, int T, int NH, int NKV, int HS, float scale) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int stride = smem_stride(HS);
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);  // (kRows, stride)
  bf16* do_s = q_s + kRows * stride;              // (kRows, stride)
  bf16* k_s = do_s + kRows * stride;              // (kTile, stride)
  bf16* v_s = k_s + kTile * stride;               // (kTile, stride)

  const int b = blockIdx.x / NH, h = blockIdx.x % NH, kvh = h / (NH / NKV);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int q0 = query_block_start();
  const size_t row_stride = qkv_row_stride(NH, NKV, HS);
  load_rows(q_s, stride, Rows{qkv + qkv_offset(b, h, 0, T, NH, NKV, HS), row_stride}, q0, kRows, T, HS);
  load_rows(do_s, stride, Rows{dout + head_offset(b, h, T, NH, HS), static_cast<size_t>(NH) * HS}, q0, kRows, T, HS);
  const Rows keys{qkv + qkv_offset(b, kvh, 1, T, NH, NKV, HS), row_stride};
  const Rows values{qkv + qkv_offset(b, kvh, 2, T, NH, NKV, HS), row_stride};

  float row_lse[kRowsPerWarp], row_delta[kRowsPerWarp], dq[kRowsPerWarp][kDimsPerLane] = {};
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int qi = q0 + warp * kRowsPerWarp + r;
    row_lse[r] = qi < T ? lse[static_cast<size_t>(blockIdx.x) * T + qi] : 0.0f;
    row_delta[r] = qi < T ? delta[static_cast<size_t>(blockIdx.x) * T + qi] : 0.0f;
  }

  const int32_t* docs = doc_start ? doc_start + static_cast<size_t>(b) * T : nullptr;
  const int q_last = min(T, q0 + kRows) - 1;
  for (int k0 = first_key(docs, q0) / kTile * kTile; k0 <= q_last; k0 += kTile) {
    __syncthreads();
    load_rows(k_s, stride, keys, k0, kTile, T, HS);
    load_rows(v_s, stride, values, k0, kTile, T, HS);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int qr = warp * kRowsPerWarp + r, qi = q0 + qr;
      if (qi >= T) continue;  // warp-uniform
      const int first = first_key(docs, qi);
      float ds = 0.0f;
      if (k0 + lane <= qi && k0 + lane >= first) {
        const float s = scale * dot_rows(q_s + qr * stride, k_s + lane * stride, HS);
        const float p = expf(s - row_lse[r]);
        const float dp = dot_rows(do_s + qr * stride, v_s + lane * stride, HS);
        ds = p * (dp - row_delta[r]);
      }
      const int n_keys = min(kTile, qi - k0 + 1);
      for (int j = max(0, first - k0); j < n_keys; ++j)
        axpy_row(dq[r], __shfl_sync(kFullMask, ds, j), k_s + j * stride, lane, HS);
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int qi = q0 + warp * kRowsPerWarp + r;
    if (qi >= T) continue;
    store_row(dqkv + qkv_offset(b, h, 0, T, NH, NKV, HS) + static_cast<size_t>(qi) * row_stride, dq[r], scale, lane,
              HS);
  }
}

// k_cache, v_cache (B,NKV,Tmax,HS) rows [past, past + Tn) = the keys and values of qkv (B,Tn,NH+2NKV,HS).
__global__ void kv_append_kernel(bf16* k_cache, bf16* v_cache, const bf16* qkv, const int32_t* rows, int N, int Tmax,
                                 int NH, int NKV, int HS) {
  const size_t n = static_cast<size_t>(N) * NKV * HS;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    // i runs over (token, h, d) of the new tokens, so reads and writes are both contiguous in d.
    const int d = static_cast<int>(i % HS);
    const size_t th = i / HS;
    const int h = static_cast<int>(th % NKV), token = static_cast<int>(th / NKV);
    if (rows[2 * token] < 0) continue;   // padding
    const size_t src = qkv_offset(0, h, 1, N, NH, NKV, HS) + static_cast<size_t>(token) * qkv_row_stride(NH, NKV, HS) + d;
    const size_t dst = ((static_cast<size_t>(rows[2 * token]) * NKV + h) * Tmax + rows[2 * token + 1]) * HS + d;
    k_cache[dst] = qkv[src];
    v_cache[dst] = qkv[src + static_cast<size_t>(NKV) * HS];
  }
}

// Keys of the cache scored per block step: one kTile chunk per warp.
constexpr int kDecodeKeys = kWarps * kTile;

// Rows [row0, row0 + n_rows) of a slot's keys and values into shared memory (rows past T zero),
// both in one pass so that their loads are in flight together; 16-byte loads with `vec` (HS a
// multiple of 8 and the caches 16-byte aligned).
__device__ void load_kv_rows(bf16* k_dst, bf16* v_dst, int stride, const bf16* keys, const bf16* values, int row0,
                             int n_rows, int T, int HS, bool vec) {
  if (!vec) {
    load_rows(k_dst, stride, Rows{keys, static_cast<size_t>(HS)}, row0, n_rows, T, HS);
    load_rows(v_dst, stride, Rows{values, static_cast<size_t>(HS)}, row0, n_rows, T, HS);
    return;
  }
  const int per_row = HS / 8;   // 16-byte pieces of a row; rows start 16-byte aligned (HS % 8 == 0)
  for (int idx = threadIdx.x; idx < n_rows * per_row; idx += blockDim.x) {
    const int r = idx / per_row, d = (idx - r * per_row) * 8, t = row0 + r;
    uint4 k = make_uint4(0, 0, 0, 0), v = k;
    if (t < T) {
      k = *reinterpret_cast<const uint4*>(keys + static_cast<size_t>(t) * HS + d);
      v = *reinterpret_cast<const uint4*>(values + static_cast<size_t>(t) * HS + d);
    }
    // Shared rows are 4-byte aligned only (their odd-word stride): four 4-byte stores each.
    uint32_t* kd = reinterpret_cast<uint32_t*>(k_dst + r * stride + d);
    uint32_t* vd = reinterpret_cast<uint32_t*>(v_dst + r * stride + d);
    kd[0] = k.x, kd[1] = k.y, kd[2] = k.z, kd[3] = k.w;
    vd[0] = v.x, vd[1] = v.y, vd[2] = v.z, vd[3] = v.w;
  }
}

// Query heads of one key/value head that a decode block serves at most.
constexpr int kDecodeGroup = 8;

// One block per (new token i, key/value head kvh, part of its group): token i at position
// rows[2i + 1] of cache slot rows[2i], for the `per_block` (<= kMaxGroup <= kDecodeGroup) query heads
// [h0, h0 + G) that read key/value head kvh, so a cache row is read once per part, not once per
// query head (per_block 1: a block per query head, more blocks for a small batch). Each
// step copies kDecodeKeys keys and their values to shared memory (one round trip to the cache);
// warp w scores chunk w of them (lane j key j) against each query head and keeps each head's own
// online softmax over their values. The warps' partial results are merged at the end. Per head
// the arithmetic is that of a block serving the head alone.
template <int kMaxGroup>
__global__ void __launch_bounds__(kThreads)
    attention_decode_kernel(bf16* out, const bf16* k_cache, const bf16* v_cache, const bf16* qkv, const int32_t* rows,
                            int N, int Tmax, int NH, int NKV, int HS, float scale, bool vec, int per_block) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int stride = smem_stride(HS), group = NH / NKV, gmax = per_block;
  const int parts = (group + per_block - 1) / per_block;
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);                        // (gmax, stride)
  bf16* k_s = q_s + gmax * stride;                                      // (kDecodeKeys, stride)
  bf16* v_s = k_s + kDecodeKeys * stride;                               // (kDecodeKeys, stride)
  float* max_s = reinterpret_cast<float*>(v_s + kDecodeKeys * stride);  // (kWarps, gmax)
  float* sum_s = max_s + kWarps * gmax;                                 // (kWarps, gmax)
  float* o_s = sum_s + kWarps * gmax;                                   // (kWarps, gmax, HS)

  const int t = blockIdx.x / (NKV * parts), kvh = blockIdx.x / parts % NKV, part = blockIdx.x % parts;
  const int h0 = kvh * group + part * per_block, G = min(per_block, group - part * per_block);
  const int slot = rows[2 * t], pos = rows[2 * t + 1];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  auto out_row = [&](int g) { return out + head_offset(0, h0 + g, N, NH, HS) + static_cast<size_t>(t) * NH * HS; };
  if (slot < 0) {   // padding: zero rows (block-uniform)
    for (int idx = threadIdx.x; idx < G * HS; idx += blockDim.x) out_row(idx / HS)[idx % HS] = to_bf16(0.0f);
    return;
  }
  const size_t cache_offset = (static_cast<size_t>(slot) * NKV + kvh) * Tmax * HS;
  const bf16* keys = k_cache + cache_offset;
  const bf16* values = v_cache + cache_offset;
  for (int g = 0; g < G; ++g)
    load_rows(q_s + g * stride, stride,
              Rows{qkv + qkv_offset(0, h0 + g, 0, N, NH, NKV, HS), qkv_row_stride(NH, NKV, HS)}, t, 1, N, HS);

  float m[kMaxGroup], l[kMaxGroup], o[kMaxGroup][kDimsPerLane] = {};
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) m[g] = -INFINITY, l[g] = 0.0f;
  for (int k0 = 0; k0 <= pos; k0 += kDecodeKeys) {
    __syncthreads();  // every warp is done with the previous keys (and q_s is loaded)
    load_kv_rows(k_s, v_s, stride, keys, values, k0, kDecodeKeys, pos + 1, HS, vec);
    __syncthreads();
    const int c0 = k0 + warp * kTile;
    if (c0 > pos) continue;  // warp-uniform
    const int kj = c0 + lane;
    const bool visible = kj <= pos;
    float p[kMaxGroup];
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= G) break;
      const float s = visible ? scale * dot_rows(q_s + g * stride, k_s + (warp * kTile + lane) * stride, HS) : -INFINITY;
      const float m_new = fmaxf(m[g], warp_max(s));  // finite: key c0 <= pos is visible
      p[g] = visible ? expf(s - m_new) : 0.0f;
      const float correction = expf(m[g] - m_new);
      l[g] = l[g] * correction + warp_sum(p[g]);
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) o[g][i] *= correction;
      m[g] = m_new;
    }
    // Each value row read once for the group: head g's sum over the keys in the same order.
    const int n_keys = min(kTile, pos - c0 + 1);
    for (int j = 0; j < n_keys; ++j) {
      const bf16* vrow = v_s + (warp * kTile + j) * stride;
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g >= G) break;
        axpy_row(o[g], __shfl_sync(kFullMask, p[g], j), vrow, lane, HS);
      }
    }
  }

  // Merge: weight each warp's sums by exp(its max - the overall max); a warp that saw no key
  // has max -inf and weight 0.
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= G) break;
    if (lane == 0) {
      max_s[warp * gmax + g] = m[g];
      sum_s[warp * gmax + g] = l[g];
    }
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i)
      if (lane + 32 * i < HS) o_s[(warp * gmax + g) * HS + lane + 32 * i] = o[g][i];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * HS; idx += blockDim.x) {
    const int g = idx / HS, d = idx % HS;
    float m_all = -INFINITY;
    for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, max_s[w * gmax + g]);
    float weight[kWarps], l_all = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      weight[w] = expf(max_s[w * gmax + g] - m_all);
      l_all += sum_s[w * gmax + g] * weight[w];
    }
    float acc = 0.0f;
    for (int w = 0; w < kWarps; ++w) acc += o_s[(w * gmax + g) * HS + d] * weight[w];
    out_row(g)[d] = to_bf16(acc / l_all);
  }
}

void check_shape(int B, int T, int NH, int NKV, int HS, const char* op) {
  TRIDENT_CHECK(HS >= 1 && HS <= kMaxHeadSize, str(op, ": head size ", HS, " outside 1..", kMaxHeadSize));
  TRIDENT_CHECK(B >= 0 && T >= 0 && NH >= 0, str(op, ": negative shape"));
  TRIDENT_CHECK(NKV > 0 && NH % NKV == 0, str(op, ": ", NKV, " key/value heads do not divide ", NH, " query heads"));
  TRIDENT_CHECK(ceil_div(T, kRows) <= 65535, str(op, ": T=", T, " needs more than 65535 query blocks"));
}

size_t smem_bytes(int HS, int bf16_rows, int float_rows) {
  return static_cast<size_t>(bf16_rows) * smem_stride(HS) * sizeof(bf16) + float_rows * sizeof(float);
}

}  // namespace

void attention_fwd(bf16* out, float* lse, const bf16* qkv, const int32_t* doc_start, int B, int T, int NH, int NKV,
                   int HS, cudaStream_t stream) {
  check_shape(B, T, NH, NKV, HS, "attention_fwd");
  if (B * T * NH == 0) return;
  if (attention_mma_supported(HS, {out, qkv})) {
    attention_fwd_mma(out, lse, qkv, doc_start, B, T, NH, NKV, HS, stream);
    return;
  }
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  const dim3 grid(B * NH, ceil_div(T, kRows));
  attention_fwd_kernel<<<grid, kThreads, smem_bytes(HS, kRows + 2 * kTile, 0), stream>>>(out, lse, qkv, doc_start, T,
                                                                                         NH, NKV, HS, scale);
  CUDA_CHECK_LAUNCH("attention_fwd_kernel");
}

void attention_bwd(bf16* dqkv, float* dbias, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse,
                   const int32_t* doc_start, const float* rope, int B, int T, int NH, int NKV, int HS,
                   Scratch& scratch, cudaStream_t stream) {
  check_shape(B, T, NH, NKV, HS, "attention_bwd");
  if (B * T * NH == 0) return;
  const size_t rows = static_cast<size_t>(B) * T * NH, row_width = qkv_row_stride(NH, NKV, HS);
  const bool mma = attention_mma_supported(HS, {dqkv, dout, qkv});
  // Scratch: delta, then (tensor-core kernels with a bias gradient) the bias column-sum partials,
  // then (tensor-core kernels with the group's query heads in parts) the dK/dV parts' sums and
  // their arrival counters.
  const int n_chunks = B * ceil_div(T, kAttentionBlockRows);
  DkvParts split;
  if (mma) split.parts = attention_dkv_parts(B, T, NH, NKV);
  float* delta = nullptr;   // (B, NH, T)
  float* bias_partials = nullptr;
  auto carve = [&](Carver& c) {
    delta = c.take<float>(rows);
    if (mma && dbias) bias_partials = c.take<float>(static_cast<size_t>(n_chunks) * row_width);
    if (split.parts == 1) return;
    split.partials = c.take<float>(attention_dkv_partial_floats(B, T, NKV, HS, split.parts));
    split.arrivals = c.take<unsigned>(attention_dkv_key_blocks(B, T, NKV));
  };
  Carver measure;
  carve(measure);
  Carver carver(scratch.get(measure.used(), stream));
  carve(carver);
  if (attention_mma_supported(HS, {dout, out})) {  // HS 64 or 128 on 16-byte rows
    const long long threads = static_cast<long long>(rows) * (HS / kVec);
    const auto kernel = HS == 64 ? attention_delta_vec_kernel<64 / kVec> : attention_delta_vec_kernel<128 / kVec>;
    kernel<<<ceil_div(threads, 256), 256, 0, stream>>>(delta, dout, out, B, T, NH);
    CUDA_CHECK_LAUNCH("attention_delta_vec_kernel");
  } else {
    attention_delta_kernel<<<ceil_div(static_cast<long long>(rows), kWarps), kThreads, 0, stream>>>(delta, dout, out,
                                                                                                    B, T, NH, HS);
    CUDA_CHECK_LAUNCH("attention_delta_kernel");
  }
  // The tensor-core kernels rotate dq and dk back as they store them, reading the table's cos and
  // sin in pairs (8-byte loads; every row is then aligned too, HS being even). The generic kernels,
  // and a table off that boundary, leave RoPE's backward to its own pass after them.
  const bool rope_in_kernels = mma && rope && reinterpret_cast<uintptr_t>(rope) % 8 == 0;
  if (mma) {
    attention_bwd_mma(dqkv, bias_partials, dout, qkv, lse, delta, doc_start, rope_in_kernels ? rope : nullptr, B, T,
                      NH, NKV, HS, split, stream);
    if (dbias) add_column_partials(dbias, bias_partials, n_chunks, static_cast<int>(row_width), stream);
  } else {
    const float scale = 1.0f / sqrtf(static_cast<float>(HS));
    const int blocks = ceil_div(T, kRows);
    attention_dkv_kernel<<<dim3(B * NKV, blocks), kThreads, smem_bytes(HS, 2 * kRows + 2 * kTile, 2 * kTile),
                           stream>>>(dqkv, dout, qkv, lse, delta, doc_start, T, NH, NKV, HS, scale);
    CUDA_CHECK_LAUNCH("attention_dkv_kernel");
    attention_dq_kernel<<<dim3(B * NH, blocks), kThreads, smem_bytes(HS, 2 * kRows + 2 * kTile, 0), stream>>>(
        dqkv, dout, qkv, lse, delta, doc_start, T, NH, NKV, HS, scale);
    CUDA_CHECK_LAUNCH("attention_dq_kernel");
    // The generic kernels leave the bias gradient to a column sum of what they wrote.
    if (dbias) add_column_sums(dbias, dqkv, B * T, static_cast<int>(row_width), scratch, stream);
  }
  if (rope && !rope_in_kernels) rope_rotate(dqkv, rope, doc_start, B, T, NH, NKV, HS, 0, -1.0f, stream);
}

void attention_decode(bf16* out, bf16* k_cache, bf16* v_cache, const bf16* qkv, const int32_t* rows, int N, int S,
                      int Tmax, int NH, int NKV, int HS, cudaStream_t stream) {
  check_shape(1, 1, NH, NKV, HS, "attention_decode");
  TRIDENT_CHECK(N >= 0 && S >= 0 && Tmax >= 0, "attention_decode: negative shape");
  TRIDENT_CHECK(static_cast<long long>(N) * NH <= 0x7fffffffLL, str("attention_decode: ", N, " tokens of ", NH,
                                                                   " heads exceed the grid"));
  if (N * NH == 0) return;
  TRIDENT_CHECK(rows != nullptr, "attention_decode: rows not given");
  const size_t n = static_cast<size_t>(N) * NKV * HS;
  kv_append_kernel<<<grid_for(n, kThreads, 65536), kThreads, 0, stream>>>(k_cache, v_cache, qkv, rows, N, Tmax, NH,
                                                                          NKV, HS);
  CUDA_CHECK_LAUNCH("kv_append_kernel");
  // Query heads per block: the whole group (up to 8) where that still gives two waves of blocks,
  // else one (a small batch needs the blocks more than the shared reads). Each head's arithmetic
  // is the same either way: the choice changes no bit.
  const int group = NH / NKV, grouped = std::min(group, kDecodeGroup);
  const bool enough = static_cast<long long>(N) * NKV * ceil_div(group, grouped) >= 2LL * multiprocessors();
  const int per_block = enough ? grouped : 1, parts = ceil_div(group, per_block);
  const size_t smem = smem_bytes(HS, per_block + 2 * kDecodeKeys, 2 * kWarps * per_block + kWarps * per_block * HS);
  // Registers for one head where a block serves one (the kernel of a plain GPT-2 decode).
  const auto kernel = per_block == 1 ? attention_decode_kernel<1> : attention_decode_kernel<kDecodeGroup>;
  allow_smem(kernel, smem);
  kernel<<<N * NKV * parts, kThreads, smem, stream>>>(out, k_cache, v_cache, qkv, rows, N, Tmax, NH, NKV, HS,
                                                              1.0f / sqrtf(static_cast<float>(HS)),
                                                              HS % 8 == 0 && aligned16(k_cache, v_cache), per_block);
  CUDA_CHECK_LAUNCH("attention_decode_kernel");
}

}  // namespace trident::gpu
