// Causal flash attention on tensor cores for head sizes 64 and 128: the FlashAttention-2 structure
// of attention.cu with every product on bf16 tensor-core instructions and fp32 accumulators:
// wgmma on sm_90a (H100, H200), mma.sync elsewhere.
#include <algorithm>
#include <type_traits>

#include "attention.cuh"
#include "attention_mma.cuh"
#include "attention_tma.cuh"
#include "mma.cuh"
#include "wgmma.cuh"

namespace trident::gpu {
namespace {

// A block is 4 warps (one warpgroup) and each warp owns 16 rows (one mma row block), so a block
// owns 64 query rows (forward, dQ) or 64 key rows (dK, dV). The other side streams through
// shared memory in tiles, double-buffered: cp.async fills the next tile while the tensor cores
// work on this one. Backward keeps the generic split, so no output has two writers and nothing
// needs atomics: one kernel over key blocks for dK, dV (streaming the queries of every query head
// of the key's group in turn) and one over query blocks for dQ, both recomputing P = exp(s - lse)
// from the forward's lse.
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kWarpRows = 16;
constexpr int kBlockRows = kWarps * kWarpRows;
static_assert(kBlockRows == kAttentionBlockRows, "bias partials are one chunk per block");
constexpr int kKeyTile = 64;  // keys per step of the forward and dQ kernels
constexpr int kKeyTiles8 = kKeyTile / 8;
constexpr int kPad = 8;  // bf16 elements of padding per row in the mma.sync engine's tiles
constexpr float kRescaleLog2 = 8.0f;  // the forward's lazy rescaling threshold (see there)
// Query blocks start at multiples of kBlockRows and key tiles at multiples of kKeyTile: every
// key tile a query block streams starts at or before the block's first query, and the last
// one is the only tile that crosses the diagonal.
static_assert(kKeyTile == kBlockRows, "the forward and dQ kernels assume square diagonal tiles");

// Queries per step of the dK/dV kernel. Its two (16, HS) fp32 accumulators take 128 registers
// per thread at HS = 128, so the score tiles are halved there to stay clear of spills.
template <int HS>
constexpr int dkv_query_tile() {
  return HS == 128 ? 32 : 64;
}

// The kernels below are written once over an engine that owns the shared-memory tile layout and
// the two kinds of product they need. Both engines keep the accumulators in the mma.m16n8k16
// C layout with warp w holding rows 16w..16w+15 of the block, so the softmax and masking code is
// shared: rows_rows is acc (64, 8 kNTiles) = A B^T with A a (64, HS) tile and B an
// (8 kNTiles, HS) tile (scores and their gradients); probs_rows is acc (64, HS) += P tile with P
// a register accumulator rounded to bf16 and tile (8 kKTiles, HS). Products are issued by
// rows_rows/probs_rows and are complete after wait(), which comes before the accumulators are
// read and before the next barrier (after which the tiles they read may be overwritten).

// mma.sync (sm_80+) on row-major tiles padded by 16 bytes per row: a row stride of an odd number
// of 16-byte units puts the 8 row addresses of an ldmatrix phase into 8 different bank groups.
// Every warp multiplies its own 16 rows; products complete as they are issued.
struct WarpMma {
  static constexpr int kAlign = 16;

  template <int HS, int kRows>
  static constexpr int tile_elems() {
    return kRows * (HS + kPad);
  }

  // Element offset of 16-byte chunk c of row r in a (kRows, HS) tile.
  template <int HS, int kRows>
  __device__ static int offset(int r, int c) {
    return r * (HS + kPad) + c * 8;
  }

  template <int HS, int kNTiles>
  __device__ static void rows_rows(float (&acc)[kNTiles][4], const bf16* a_tile, const bf16* b_tile, int warp,
                                   int lane) {
    constexpr int kStride = HS + kPad;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HS / 16; ++kk) {
      uint32_t a[4];
      ldmatrix_x4(a, a_tile + (warp * kWarpRows + lane % 16) * kStride + kk * 16 + (lane / 16) * 8);
#pragma unroll
      for (int np = 0; np < kNTiles / 2; ++np) {
        // B[k][n] = b_tile[n][k]: b[0], b[1] serve n np*16..+7 and b[2], b[3] the next 8.
        uint32_t b[4];
        ldmatrix_x4(b, b_tile + (np * 16 + lane % 8 + (lane / 16) * 8) * kStride + kk * 16 + ((lane / 8) % 2) * 8);
        mma_bf16_16816(acc[2 * np], a, b[0], b[1]);
        mma_bf16_16816(acc[2 * np + 1], a, b[2], b[3]);
      }
    }
  }

  template <int HS, int kKTiles>
  __device__ static void probs_rows(float (&acc)[HS / 8][4], const float (&p)[kKTiles][4], const bf16* tile, int lane) {
    constexpr int kStride = HS + kPad;
#pragma unroll
    for (int kk = 0; kk < kKTiles / 2; ++kk) {
      uint32_t a[4];
      pack_probs<kKTiles>(a, p, kk);
#pragma unroll
      for (int dp = 0; dp < HS / 16; ++dp) {
        // B[k][n] = tile[k][n], transposed by ldmatrix.
        uint32_t b[4];
        ldmatrix_x4_trans(b, tile + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kStride + dp * 16 + (lane / 16) * 8);
        mma_bf16_16816(acc[2 * dp], a, b[0], b[1]);
        mma_bf16_16816(acc[2 * dp + 1], a, b[2], b[3]);
      }
    }
  }

  // cp.async copies are visible to ldmatrix once waited for and behind a barrier.
  __device__ static void tiles_landed() {}

  template <class... Acc>
  __device__ static void wait(Acc&...) {}
};

// wgmma (sm_90a) on 128-byte-swizzled tiles (wgmma.cuh): the four warps issue each product
// together for all 64 rows, reading both operands (rows_rows) or B (probs_rows) straight from
// shared memory; products run asynchronously until wait().
struct GroupMma {
  static constexpr int kAlign = kSwizzleAtomBytes;

  template <int HS, int kRows>
  static constexpr int tile_elems() {
    return kRows * HS;
  }

  template <int HS, int kRows>
  __device__ static int offset(int r, int c) {
    return swizzled_offset<kRows>(r, c);
  }

  template <int HS, int kNTiles>
  __device__ static void rows_rows(float (&acc)[kNTiles][4], const bf16* a_tile, const bf16* b_tile, int, int) {
    static_assert(kNTiles == 8 || kNTiles == 4, "score tiles are 64 or 32 wide");
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HS / 16; ++kk) {
      const uint64_t a = wgmma_k_major<kBlockRows>(a_tile, kk), b = wgmma_k_major<8 * kNTiles>(b_tile, kk);
      if constexpr (kNTiles == 8) {
        wgmma_ss_m64n64k16(acc, a, b, kk > 0);
      } else {
        wgmma_ss_m64n32k16(acc, a, b, kk > 0);
      }
    }
    wgmma_commit();
  }

  template <int HS, int kKTiles>
  __device__ static void probs_rows(float (&acc)[HS / 8][4], const float (&p)[kKTiles][4], const bf16* tile, int) {
    // B is N-major, 8 kKTiles rows (k) by HS columns (n).
    // The A fragments are packed before the group starts: registers a running wgmma reads must
    // not be written until it completes.
    uint32_t a[kKTiles / 2][4];
#pragma unroll
    for (int kk = 0; kk < kKTiles / 2; ++kk) pack_probs<kKTiles>(a[kk], p, kk);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKTiles / 2; ++kk) {
      const uint64_t b = wgmma_n_major<8 * kKTiles>(tile, kk);
      if constexpr (HS == 64) {
        wgmma_rs_m64n64k16(acc, a[kk], b);
      } else {
        wgmma_rs_m64n128k16(acc, a[kk], b);
      }
    }
    wgmma_commit();
  }

  // The landed cp.async writes (generic proxy) must be visible to wgmma's reads (async proxy).
  __device__ static void tiles_landed() { fence_proxy_async_shared(); }

  template <class... Acc>
  __device__ static void wait(Acc&... acc) {
    wgmma_wait();
    (wgmma_fence_operands(acc), ...);
  }
};

// Copies rows [row0, row0 + kRows) of a (T, HS) matrix whose rows lie row_stride elements apart
// into a (kRows, HS) tile in shared memory, asynchronously; rows past T become zeros.
template <class Mma, int HS, int kRows>
__device__ __forceinline__ void load_tile(bf16* dst, const bf16* src, size_t row_stride, int row0, int T) {
  constexpr int kChunks = HS / 8;  // 16-byte pieces per row
  static_assert(kRows * kChunks % kThreads == 0, "every thread copies the same number of pieces");
#pragma unroll
  for (int it = 0; it < kRows * kChunks / kThreads; ++it) {
    const int i = threadIdx.x + it * kThreads, r = i / kChunks, c = i % kChunks, t = row0 + r;
    const bool valid = t < T;
    cp_async_16(dst + Mma::template offset<HS, kRows>(r, c),
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

// Waits for this thread's copies, then (with the barrier that follows) makes every thread's
// copies visible to the engine's products.
template <class Mma>
__device__ __forceinline__ void tiles_landed() {
  cp_async_wait_all();
  Mma::tiles_landed();
}

// As tiles_landed, for the copies committed before the last `kPending` groups.
template <class Mma, int kPending>
__device__ __forceinline__ void tiles_landed_but() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
  Mma::tiles_landed();
}

// Writes a warp's (16, HS) accumulator, row r scaled by factor[r / 8], as bf16 to rows
// [row0, row0 + 16) of dst (rows dst_stride elements apart; rows >= T are skipped). The rows go
// through this warp's own 16 rows of the (kBlockRows, HS) tile `stage`, which must be free by
// now, so that the global stores are 16 bytes wide. With `rope` (a rope_table) each row leaves
// rotated back as rope_bwd rotates a gradient row (element d against d + HS/2 at the row's
// position: its index, less its document's start docs[row] where docs is given), in fp32 before
// the one rounding: a lane holds both elements of each pair (tiles dt and dt + HS/16).
template <class Mma, int HS>
__device__ __forceinline__ void store_rows(bf16* dst, size_t dst_stride, int row0, int T, const float (&acc)[HS / 8][4],
                                           const float (&factor)[2], bf16* stage, int warp, int lane,
                                           const float* rope = nullptr, const int32_t* docs = nullptr) {
  constexpr int kChunks = HS / 8;
  const int stage_row0 = warp * kWarpRows;
  auto put = [&](int r, int dt, float x0, float x1) {
    *reinterpret_cast<__nv_bfloat162*>(
        stage + Mma::template offset<HS, kBlockRows>(stage_row0 + lane / 4 + 8 * r, dt) + (lane % 4) * 2) =
        __floats2bfloat162_rn(x0, x1);
  };
  if (rope) {
    constexpr int kHalf = HS / 16;   // tiles of a head's first half
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int t = min(row0 + lane / 4 + 8 * r, T - 1);   // rows past T are not stored
      const float* cs = rope + static_cast<size_t>(t - (docs ? docs[t] : 0)) * HS;
#pragma unroll
      for (int dt = 0; dt < kHalf; ++dt) {
        const int d = dt * 8 + (lane % 4) * 2;
        const float2 c = *reinterpret_cast<const float2*>(cs + d), s = *reinterpret_cast<const float2*>(cs + HS / 2 + d);
        const float a0 = acc[dt][2 * r] * factor[r], a1 = acc[dt][2 * r + 1] * factor[r];
        const float b0 = acc[dt + kHalf][2 * r] * factor[r], b1 = acc[dt + kHalf][2 * r + 1] * factor[r];
        put(r, dt, a0 * c.x + b0 * s.x, a1 * c.y + b1 * s.y);
        put(r, dt + kHalf, b0 * c.x - a0 * s.x, b1 * c.y - a1 * s.y);
      }
    }
  } else {
#pragma unroll
    for (int dt = 0; dt < HS / 8; ++dt)
#pragma unroll
      for (int r = 0; r < 2; ++r) put(r, dt, acc[dt][2 * r] * factor[r], acc[dt][2 * r + 1] * factor[r]);
  }
  __syncwarp();
#pragma unroll
  for (int it = 0; it < kWarpRows * kChunks / 32; ++it) {
    const int i = lane + it * 32, r = i / kChunks, c = i % kChunks;
    if (row0 + r < T)
      *reinterpret_cast<uint4*>(dst + static_cast<size_t>(row0 + r) * dst_stride + c * 8) =
          *reinterpret_cast<const uint4*>(stage + Mma::template offset<HS, kBlockRows>(stage_row0 + r, c));
  }
}

// Writes to dst (HS floats) the column sums of rows [0, rows) of a (kBlockRows, HS) tile that
// store_rows staged (every warp's rows, so after a barrier): one block's share of the qkv bias
// gradient, summed from the bf16 values that went to global memory.
template <class Mma, int HS>
__device__ __forceinline__ void store_column_sums(float* dst, const bf16* stage, int rows) {
  for (int c = threadIdx.x; c < HS; c += kThreads) {
    float s = 0.0f;
#pragma unroll 16
    for (int r = 0; r < kBlockRows; ++r)
      if (r < rows) s += to_float(stage[Mma::template offset<HS, kBlockRows>(r, c / 8) + c % 8]);
    dst[c] = s;
  }
}

// The dynamic shared memory of a kernel, aligned as the engine's tiles need (launches ask for
// kAlign - 16 bytes more than the tiles take).
template <class Mma>
__device__ __forceinline__ unsigned char* aligned_smem(unsigned char* raw) {
  return align_shared<Mma::kAlign>(raw);
}

// The qkv bias gradient goes through partial column sums, one row of (NH + 2 NKV) HS floats per
// (b, 64-row block) chunk, ordered (b, block) and laid out like a qkv row: the dK/dV kernel fills
// the key and value heads of its key block's chunk, the dQ kernel the query head of its query
// block's chunk. Head h of slot `slot` as in qkv_offset.
__device__ __forceinline__ size_t bias_partial_offset(int b, int block, int h, int slot, int NH, int NKV, int HS) {
  return (static_cast<size_t>(b) * gridDim.y + block) * qkv_row_stride(NH, NKV, HS) +
         qkv_offset(0, h, slot, 0, NH, NKV, HS);
}

// Causal work grows with the query index: the last query blocks go first so that the longest
// blocks do not start in the final wave.
__device__ __forceinline__ int query_block_start() { return (gridDim.y - 1 - blockIdx.y) * kBlockRows; }

// Packed: the end of the queries that see keys [k0, k_last]: the first query after k_last whose
// document starts after k_last (doc_start is nondecreasing: a binary search), or T.
__device__ __forceinline__ int query_end(const int32_t* docs, int k_last, int T) {
  int lo = k_last + 1, hi = T;   // docs[q] <= k_last for q <= k_last
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (docs[mid] > k_last) hi = mid; else lo = mid + 1;
  }
  return lo;
}

// The key and value tiles of one (b, key/value head) that the forward and dQ kernels stream,
// kKeyTile rows at a time, in `smem`: with two value stages, two stages of K then V (tiles j in
// stage j % 2); with one, two key stages (key tile j in j % 2) and then the value tile.
template <class Mma, int HS, int kValueStages = 2>
struct KeyValueTiles {
  static constexpr int kTileElems = Mma::template tile_elems<HS, kKeyTile>();
  static constexpr int kElems = (2 + kValueStages) * kTileElems;  // shared memory the stages take

  bf16* smem;
  const bf16* keys;
  const bf16* values;
  size_t row_stride;
  int T;

  __device__ KeyValueTiles(bf16* smem_, const bf16* qkv, int b, int kvh, int T_, int NH, int NKV)
      : smem(smem_),
        keys(qkv + qkv_offset(b, kvh, 1, T_, NH, NKV, HS)),
        values(qkv + qkv_offset(b, kvh, 2, T_, NH, NKV, HS)),
        row_stride(qkv_row_stride(NH, NKV, HS)),
        T(T_) {}

  static_assert(kValueStages == 1 || kValueStages == 2, "one or two value stages");

  // Start the copies of key tile j, value tile j, or both (the caller commits them).
  __device__ void load_keys(int j) const {
    load_tile<Mma, HS, kKeyTile>(smem + key_offset(j), keys, row_stride, j * kKeyTile, T);
  }
  __device__ void load_values(int j) const {
    load_tile<Mma, HS, kKeyTile>(smem + value_offset(j), values, row_stride, j * kKeyTile, T);
  }
  __device__ void load(int j) const {
    load_keys(j);
    load_values(j);
  }

  __device__ const bf16* key_tile(int j) const { return smem + key_offset(j); }
  __device__ const bf16* value_tile(int j) const { return smem + value_offset(j); }

 private:
  __device__ static int key_offset(int j) { return (j % 2) * (kValueStages == 2 ? 2 : 1) * kTileElems; }
  __device__ static int value_offset(int j) {
    return kValueStages == 2 ? key_offset(j) + kTileElems : 2 * kTileElems;
  }
};

// The forward at HS = 128 on the wgmma engine keeps one stage of values: 64 KB of shared memory
// and at most 168 registers a thread (ptxas gives 160 and 168) let a multiprocessor hold three
// blocks instead of two. The next value tile is then copied once this one's product is done,
// beside the next key tile's scores and softmax. Elsewhere two stages: shared memory does not set
// the blocks per multiprocessor there.
template <class Mma, int HS>
constexpr int fwd_value_stages() {
  return std::is_same_v<Mma, GroupMma> && HS == 128 ? 1 : 2;
}

template <class Mma, int HS>
constexpr size_t fwd_smem_bytes() {
  return (Mma::template tile_elems<HS, kBlockRows>() + KeyValueTiles<Mma, HS, fwd_value_stages<Mma, HS>()>::kElems) *
             sizeof(bf16) +
         Mma::kAlign - 16;
}

// The first key tile a query block streams: packed (kPacked, doc_start given) the tile of its first
// query's document start, since every later query's document starts no earlier; else tile 0.
template <bool kPacked>
__device__ __forceinline__ int first_key_tile(const int32_t* docs, int q0) {
  return kPacked ? docs[q0] / kKeyTile : 0;
}

// Document start of query qi of a packed sequence (0 past T, where nothing is stored).
__device__ __forceinline__ int doc_of(const int32_t* docs, int qi, int T) { return qi < T ? docs[qi] : 0; }

// kPacked: docs (T) is this sequence's doc_start (backend.hpp); key tiles before the block's
// first document are skipped, keys before a row's document are hidden. A row may then see no key
// of a tile: its running max stays -inf, and the exponentials are taken against 0 instead.
template <class Mma, int HS, bool kPacked>
__global__ void __launch_bounds__(kThreads)
    attention_fwd_mma_kernel(bf16* out, float* lse, const bf16* qkv, const int32_t* doc_start, int T, int NH, int NKV,
                             float scale) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* q_s = reinterpret_cast<bf16*>(aligned_smem<Mma>(smem_raw));  // (kBlockRows, HS)
  const int b = blockIdx.x / NH, h = blockIdx.x % NH;
  constexpr bool kOneValueStage = fwd_value_stages<Mma, HS>() == 1;
  const KeyValueTiles<Mma, HS, fwd_value_stages<Mma, HS>()> kv(q_s + Mma::template tile_elems<HS, kBlockRows>(), qkv, b,
                                                               h / (NH / NKV), T, NH, NKV);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int q0 = query_block_start();
  const int n_tiles = (min(T, q0 + kBlockRows) - 1) / kKeyTile + 1;
  const int32_t* docs = kPacked ? doc_start + static_cast<size_t>(b) * T : nullptr;
  const int j0 = first_key_tile<kPacked>(docs, q0);
  load_tile<Mma, HS, kBlockRows>(q_s, qkv + qkv_offset(b, h, 0, T, NH, NKV, HS), kv.row_stride, q0, T);
  // One value stage: the queries and keys in one group, the values in the next.
  if constexpr (kOneValueStage) {
    kv.load_keys(j0);
    cp_async_commit();
    kv.load_values(j0);
  } else {
    kv.load(j0);
  }
  cp_async_commit();

  // This lane's accumulator elements 0, 1 belong to query row_lo, elements 2, 3 to row_lo + 8.
  const int row_lo = q0 + warp * kWarpRows + lane / 4;
  const int row_doc[2] = {kPacked ? doc_of(docs, row_lo, T) : 0, kPacked ? doc_of(docs, row_lo + 8, T) : 0};
  const float scale_log2 = scale * kLog2e;
  float o[HS / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // running max (raw score) and sum
  for (int j = j0; j < n_tiles; ++j) {
    if constexpr (kOneValueStage) {
      tiles_landed_but<Mma, 1>();   // key tile j; value tile j may be on its way
      __syncthreads();  // key tile j is visible to every warp, and every warp is done with key tile j - 1
      if (j + 1 < n_tiles) {
        kv.load_keys(j + 1);
        cp_async_commit();
      }
    } else {
      tiles_landed<Mma>();
      __syncthreads();  // tile j is visible to every warp, and every warp is done with tile j - 1
      if (j + 1 < n_tiles) {
        kv.load(j + 1);
        cp_async_commit();
      }
    }
    const bf16* k_s = kv.key_tile(j);

    float s[kKeyTiles8][4];
    Mma::template rows_rows<HS, kKeyTiles8>(s, q_s, k_s, warp, lane);
    Mma::wait(s);
    const int k0 = j * kKeyTile;
    if (k0 + kKeyTile - 1 > q0 + warp * kWarpRows) {  // the diagonal tile: hide later keys (and keys >= T)
#pragma unroll
      for (int nt = 0; nt < kKeyTiles8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (k0 + nt * 8 + (lane % 4) * 2 + e % 2 > row_lo + 8 * (e / 2)) s[nt][e] = -INFINITY;
    }
    if (kPacked && k0 < max(row_doc[0], row_doc[1])) {  // a tile before a row's document: hide its keys
#pragma unroll
      for (int nt = 0; nt < kKeyTiles8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (k0 + nt * 8 + (lane % 4) * 2 + e % 2 < row_doc[e / 2]) s[nt][e] = -INFINITY;
    }
    float m_new[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kKeyTiles8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      // The four lanes of a row group share the row.
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
      m_new[r] = fmaxf(m[r], mx);  // finite unpacked: every row sees the first key of every tile
    }
    // Lazy rescaling: the exponentials are taken against m, the row's largest score when o and l
    // were last rescaled, until some row of the warp outgrows it by more than 2^kRescaleLog2 in
    // exp2 units (then the warp rescales all its rows). Probabilities up to 2^8 stay exact in
    // bf16's range and fp32 sums, and o / l is the same quotient; scores rarely grow that much
    // after the first tile, so most tiles skip the 2 HS / 8 multiplies of o per thread.
    const bool grow = (m_new[0] - m[0]) * scale_log2 > kRescaleLog2 || (m_new[1] - m[1]) * scale_log2 > kRescaleLog2;
    if (__any_sync(kFullMask, grow)) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        // 0 on the first tile (m = -inf); packed, 1 while the row has seen no key (both -inf).
        const float correction =
            kPacked && m_new[r] == -INFINITY ? 1.0f : fast_exp2((m[r] - m_new[r]) * scale_log2);
        l[r] *= correction;
#pragma unroll
        for (int dt = 0; dt < HS / 8; ++dt) {
          o[dt][2 * r] *= correction;
          o[dt][2 * r + 1] *= correction;
        }
        m[r] = m_new[r];
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float offset = kPacked && m[r] == -INFINITY ? 0.0f : m[r] * scale_log2;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kKeyTiles8; ++nt)
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          s[nt][e] = fast_exp2(fmaf(s[nt][e], scale_log2, -offset));
          sum += s[nt][e];
        }
      l[r] += sum;  // this lane's share of the row; summed over the group at the end
    }
    if constexpr (kOneValueStage) {
      if (j + 1 < n_tiles) {
        tiles_landed_but<Mma, 1>();   // value tile j; key tile j + 1 may be on its way
      } else {
        tiles_landed<Mma>();
      }
      __syncthreads();  // value tile j is visible to every warp
    }
    Mma::template probs_rows<HS, kKeyTiles8>(o, s, kv.value_tile(j), lane);
    Mma::wait(o);
    if constexpr (kOneValueStage) {
      if (j + 1 < n_tiles) {
        __syncthreads();  // every warp is done with value tile j
        kv.load_values(j + 1);
        cp_async_commit();
      }
    }
  }

  float inv_l[2];
  row_totals(l, inv_l);
  __syncthreads();  // every warp's products have read q_s
  store_rows<Mma, HS>(out + head_offset(b, h, T, NH, HS), static_cast<size_t>(NH) * HS, q0 + warp * kWarpRows, T, o,
                      inv_l, q_s, warp, lane);
  if (lane % 4 == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int qi = row_lo + 8 * r;
      if (qi < T) lse[static_cast<size_t>(blockIdx.x) * T + qi] = m[r] * scale + logf(l[r]);
    }
  }
}

template <class Mma, int HS>
constexpr size_t dkv_smem_bytes() {
  constexpr int kQTile = dkv_query_tile<HS>();
  return (2 * Mma::template tile_elems<HS, kBlockRows>() + 4 * Mma::template tile_elems<HS, kQTile>()) * sizeof(bf16) +
         4 * kQTile * sizeof(float) + Mma::kAlign - 16;
}

// Where a key block's dK, dV are summed over several blocks (DkvParts): each writes its fp32
// sums to its place in `partials` (thread-major, so the stores are coalesced), and the block that
// arrives last adds all the parts up in part order (the same bits whichever arrives last) and
// returns true; the others return false and are done.
template <int HS>
__device__ __forceinline__ bool combine_parts(float (&dk)[HS / 8][4], float (&dv)[HS / 8][4], float* partials,
                                              unsigned* arrivals, size_t tile, int part, int parts) {
  constexpr int kVecs = HS / 8;   // float4 per accumulator and thread
  float4* all = reinterpret_cast<float4*>(partials);
  const size_t part_vecs = 2 * kVecs * kThreads;
  float4* mine = all + (tile * parts + part) * part_vecs;
#pragma unroll
  for (int dt = 0; dt < kVecs; ++dt) {
    mine[dt * kThreads + threadIdx.x] = make_float4(dk[dt][0], dk[dt][1], dk[dt][2], dk[dt][3]);
    mine[(kVecs + dt) * kThreads + threadIdx.x] = make_float4(dv[dt][0], dv[dt][1], dv[dt][2], dv[dt][3]);
  }
  __threadfence();   // the sums are visible device-wide before this block counts itself in
  __syncthreads();
  __shared__ bool last;
  if (threadIdx.x == 0) last = atomicAdd(arrivals + tile, 1u) == static_cast<unsigned>(parts - 1);
  __syncthreads();
  if (!last) return false;
  __threadfence();
  // One accumulator vector at a time, the parts in order (few registers beside dk and dv).
  const float4* first = all + tile * parts * part_vecs + threadIdx.x;
  auto sum_parts = [&](float (&acc)[4], int vec) {
    float4 a = __ldcg(first + vec * kThreads);
#pragma unroll 1
    for (int p = 1; p < parts; ++p) {
      const float4 b = __ldcg(first + p * part_vecs + vec * kThreads);
      a.x += b.x;
      a.y += b.y;
      a.z += b.z;
      a.w += b.w;
    }
    acc[0] = a.x;
    acc[1] = a.y;
    acc[2] = a.z;
    acc[3] = a.w;
  };
#pragma unroll
  for (int dt = 0; dt < kVecs; ++dt) {
    sum_parts(dk[dt], dt);
    sum_parts(dv[dt], kVecs + dt);
  }
  return true;
}

// Blocks per multiprocessor the dK/dV kernel is compiled for: 3 at HS = 64 (at most 170
// registers), where the code of the split heads' sums (combine_parts) would otherwise take the
// packed kernel to 238 registers and two blocks; the compiler's choice at HS = 128 (two blocks).
template <int HS>
constexpr int dkv_min_blocks() {
  return HS == 64 ? 3 : 1;
}

// dK, dV of the 64 keys of this block, streaming the queries that see them: the query tiles of
// each query head of the group (or of its part `blockIdx.x % parts`, DkvParts) in turn, through
// one pipeline, so each key's sum over those heads is accumulated in registers in one order.
// kPacked: the queries of each head end at the first one of a document after the block's last
// key (query_end); queries of an earlier document than a key's are hidden.
template <class Mma, int HS, bool kPacked>
__global__ void __launch_bounds__(kThreads, dkv_min_blocks<HS>())
    attention_dkv_mma_kernel(bf16* dqkv, float* bias_partials, const bf16* dout, const bf16* qkv, const float* lse,
                             const float* delta, const int32_t* doc_start, const float* rope, int T, int NH, int NKV,
                             float scale, DkvParts split) {
  constexpr int kQTile = dkv_query_tile<HS>(), kQTiles8 = kQTile / 8;
  constexpr int kKeyElems = Mma::template tile_elems<HS, kBlockRows>(), kQElems = Mma::template tile_elems<HS, kQTile>();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* k_s = reinterpret_cast<bf16*>(aligned_smem<Mma>(smem_raw));   // (kBlockRows, HS)
  bf16* v_s = k_s + kKeyElems;                                         // (kBlockRows, HS)
  bf16* qdo_s = v_s + kKeyElems;                                       // 2 stages of Q, dout (kQTile, HS)
  float* stats_s = reinterpret_cast<float*>(qdo_s + 4 * kQElems);      // 2 stages of lse, delta (kQTile)

  const int part = blockIdx.x % split.parts, b = blockIdx.x / split.parts / NKV, kvh = blockIdx.x / split.parts % NKV;
  const int group = NH / NKV, heads = group / split.parts;   // the query heads of this part
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k0 = blockIdx.y * kBlockRows;  // early keys see the most queries and go first
  const size_t row_stride = qkv_row_stride(NH, NKV, HS), dout_stride = static_cast<size_t>(NH) * HS;
  // Starts the copies of the query tile at row0 of query head `head` into `stage`.
  auto load_queries = [&](int stage, int head, int row0) {
    bf16* dst = qdo_s + stage * 2 * kQElems;
    const size_t bh = static_cast<size_t>(b) * NH + head;
    load_tile<Mma, HS, kQTile>(dst, qkv + qkv_offset(b, head, 0, T, NH, NKV, HS), row_stride, row0, T);
    load_tile<Mma, HS, kQTile>(dst + kQElems, dout + head_offset(b, head, T, NH, HS), dout_stride, row0, T);
    load_vector<kQTile>(stats_s + stage * 2 * kQTile, lse + bh * T, row0, T);
    load_vector<kQTile>(stats_s + stage * 2 * kQTile + kQTile, delta + bh * T, row0, T);
    cp_async_commit();
  };
  load_tile<Mma, HS, kBlockRows>(k_s, qkv + qkv_offset(b, kvh, 1, T, NH, NKV, HS), row_stride, k0, T);
  load_tile<Mma, HS, kBlockRows>(v_s, qkv + qkv_offset(b, kvh, 2, T, NH, NKV, HS), row_stride, k0, T);
  // Query tiles start at k0: earlier queries do not see these keys.
  int h = kvh * group + part * heads, q0 = k0;  // the query head and first query of tile j
  load_queries(0, h, q0);

  // This lane's accumulator elements 0, 1 belong to key key_lo, elements 2, 3 to key_lo + 8;
  // element e of n8 tile nt is query q0 + 8 nt + 2 (lane % 4) + e % 2.
  const int key_lo = k0 + warp * kWarpRows + lane / 4;
  const float scale_log2 = scale * kLog2e;
  const int32_t* docs = kPacked ? doc_start + static_cast<size_t>(b) * T : nullptr;
  const int q_end = kPacked ? query_end(docs, min(T, k0 + kBlockRows) - 1, T) : T;
  const int n_tiles = heads * ((q_end - k0 + kQTile - 1) / kQTile);
  float dk[HS / 8][4] = {}, dv[HS / 8][4] = {};
  for (int j = 0; j < n_tiles; ++j) {
    tiles_landed<Mma>();
    __syncthreads();  // tile j is visible to every warp, and every warp is done with tile j - 1
    // Tile j + 1: the next query tile of this head, or the first of the next head.
    int h_next = h, q_next = q0 + kQTile;
    if (q_next >= q_end) {
      ++h_next;
      q_next = k0;
    }
    if (j + 1 < n_tiles) load_queries((j + 1) % 2, h_next, q_next);
    const bf16* q_s = qdo_s + (j % 2) * 2 * kQElems;
    const bf16* do_s = q_s + kQElems;
    const float* lse_s = stats_s + (j % 2) * 2 * kQTile;
    const float* delta_s = lse_s + kQTile;

    float p[kQTiles8][4], ds[kQTiles8][4];
    Mma::template rows_rows<HS, kQTiles8>(p, k_s, q_s, warp, lane);    // s^T = K Q^T
    Mma::template rows_rows<HS, kQTiles8>(ds, v_s, do_s, warp, lane);  // dp^T = V dout^T
    Mma::wait(p, ds);
    const bool edge = q0 < k0 + kBlockRows || q0 + kQTile > T;  // queries before a key, or past T
#pragma unroll
    for (int nt = 0; nt < kQTiles8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qc = nt * 8 + (lane % 4) * 2 + e % 2, qi = q0 + qc;
        float pe = fast_exp2(fmaf(p[nt][e], scale_log2, -lse_s[qc] * kLog2e));
        if (edge && (qi < key_lo + 8 * (e / 2) || qi >= T)) pe = 0.0f;
        if (kPacked && qi < T && docs[qi] > key_lo + 8 * (e / 2)) pe = 0.0f;   // a later document's query
        p[nt][e] = pe;
        ds[nt][e] = pe * (ds[nt][e] - delta_s[qc]);
      }
    Mma::template probs_rows<HS, kQTiles8>(dv, p, do_s, lane);  // dV += P^T dout
    Mma::template probs_rows<HS, kQTiles8>(dk, ds, q_s, lane);  // dK += dS^T Q
    Mma::wait(dv, dk);
    h = h_next;
    q0 = q_next;
  }

  const float dk_factor[2] = {scale, scale}, dv_factor[2] = {1.0f, 1.0f};
  __syncthreads();  // every warp's products have read k_s and v_s
  if (split.parts > 1 &&
      !combine_parts<HS>(dk, dv, split.partials, split.arrivals,
                         static_cast<size_t>(blockIdx.x / split.parts) * gridDim.y + blockIdx.y, part, split.parts))
    return;
  store_rows<Mma, HS>(dqkv + qkv_offset(b, kvh, 1, T, NH, NKV, HS), row_stride, k0 + warp * kWarpRows, T, dk, dk_factor,
                      k_s, warp, lane, rope, docs);
  store_rows<Mma, HS>(dqkv + qkv_offset(b, kvh, 2, T, NH, NKV, HS), row_stride, k0 + warp * kWarpRows, T, dv, dv_factor,
                      v_s, warp, lane);
  if (bias_partials) {
    __syncthreads();  // every warp's rows are staged
    store_column_sums<Mma, HS>(bias_partials + bias_partial_offset(b, blockIdx.y, kvh, 1, NH, NKV, HS), k_s,
                               min(kBlockRows, T - k0));
    store_column_sums<Mma, HS>(bias_partials + bias_partial_offset(b, blockIdx.y, kvh, 2, NH, NKV, HS), v_s,
                               min(kBlockRows, T - k0));
  }
}

template <class Mma, int HS>
constexpr size_t dq_smem_bytes() {
  return (2 * Mma::template tile_elems<HS, kBlockRows>() + KeyValueTiles<Mma, HS>::kElems) * sizeof(bf16) +
         Mma::kAlign - 16;
}

// Blocks per multiprocessor the dQ kernel is compiled for: 4 for the wgmma engine at HS = 64,
// which caps it at 128 registers (from 139, with a 20-byte spill outside the loop) and fits a
// fourth block: 2% faster at GPT-2's shape (0.171 against 0.175 ms on H200). Elsewhere the
// compiler's choice.
template <class Mma, int HS>
constexpr int dq_min_blocks() {
  return std::is_same_v<Mma, GroupMma> && HS == 64 ? 4 : 1;
}

// dQ of the 64 queries of this block, streaming the keys they see.
// kPacked as the forward's.
template <class Mma, int HS, bool kPacked>
__global__ void __launch_bounds__(kThreads, dq_min_blocks<Mma, HS>())
    attention_dq_mma_kernel(bf16* dqkv, float* bias_partials, const bf16* dout, const bf16* qkv, const float* lse,
                            const float* delta, const int32_t* doc_start, const float* rope, int T, int NH, int NKV,
                            float scale) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* q_s = reinterpret_cast<bf16*>(aligned_smem<Mma>(smem_raw));  // (kBlockRows, HS)
  bf16* do_s = q_s + Mma::template tile_elems<HS, kBlockRows>();     // (kBlockRows, HS)
  const int b = blockIdx.x / NH, h = blockIdx.x % NH;
  const KeyValueTiles<Mma, HS> kv(do_s + Mma::template tile_elems<HS, kBlockRows>(), qkv, b, h / (NH / NKV), T, NH,
                                  NKV);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int q0 = query_block_start();
  const int n_tiles = (min(T, q0 + kBlockRows) - 1) / kKeyTile + 1;
  const size_t row_stride = kv.row_stride;
  const int32_t* docs = kPacked ? doc_start + static_cast<size_t>(b) * T : nullptr;
  const int j0 = first_key_tile<kPacked>(docs, q0);
  load_tile<Mma, HS, kBlockRows>(q_s, qkv + qkv_offset(b, h, 0, T, NH, NKV, HS), row_stride, q0, T);
  load_tile<Mma, HS, kBlockRows>(do_s, dout + head_offset(b, h, T, NH, HS), static_cast<size_t>(NH) * HS, q0, T);
  kv.load(j0);
  cp_async_commit();

  // This lane's accumulator elements 0, 1 belong to query row_lo, elements 2, 3 to row_lo + 8.
  const int row_lo = q0 + warp * kWarpRows + lane / 4;
  const int row_doc[2] = {kPacked ? doc_of(docs, row_lo, T) : 0, kPacked ? doc_of(docs, row_lo + 8, T) : 0};
  const float scale_log2 = scale * kLog2e;
  float row_lse[2], row_delta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int qi = row_lo + 8 * r;
    row_lse[r] = qi < T ? lse[static_cast<size_t>(blockIdx.x) * T + qi] * kLog2e : 0.0f;
    row_delta[r] = qi < T ? delta[static_cast<size_t>(blockIdx.x) * T + qi] : 0.0f;
  }

  float dq[HS / 8][4] = {};
  for (int j = j0; j < n_tiles; ++j) {
    tiles_landed<Mma>();
    __syncthreads();  // tile j is visible to every warp, and every warp is done with tile j - 1
    if (j + 1 < n_tiles) {
      kv.load(j + 1);
      cp_async_commit();
    }
    const bf16* k_s = kv.key_tile(j);

    float p[kKeyTiles8][4], ds[kKeyTiles8][4];
    Mma::template rows_rows<HS, kKeyTiles8>(p, q_s, k_s, warp, lane);                 // s = Q K^T
    Mma::template rows_rows<HS, kKeyTiles8>(ds, do_s, kv.value_tile(j), warp, lane);  // dp = dout V^T
    Mma::wait(p, ds);
    const int k0 = j * kKeyTile;
    const bool diagonal = k0 + kKeyTile - 1 > q0 + warp * kWarpRows;
#pragma unroll
    for (int nt = 0; nt < kKeyTiles8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        float pe = fast_exp2(fmaf(p[nt][e], scale_log2, -row_lse[r]));
        if (diagonal && k0 + nt * 8 + (lane % 4) * 2 + e % 2 > row_lo + 8 * r) pe = 0.0f;
        if (kPacked && k0 + nt * 8 + (lane % 4) * 2 + e % 2 < row_doc[r]) pe = 0.0f;   // an earlier document's key
        ds[nt][e] = pe * (ds[nt][e] - row_delta[r]);
      }
    Mma::template probs_rows<HS, kKeyTiles8>(dq, ds, k_s, lane);  // dQ += dS K
    Mma::wait(dq);
  }

  const float factor[2] = {scale, scale};
  __syncthreads();  // every warp's products have read q_s
  store_rows<Mma, HS>(dqkv + qkv_offset(b, h, 0, T, NH, NKV, HS), row_stride, q0 + warp * kWarpRows, T, dq, factor,
                      q_s, warp, lane, rope, docs);
  if (bias_partials) {
    __syncthreads();  // every warp's rows are staged
    store_column_sums<Mma, HS>(bias_partials + bias_partial_offset(b, q0 / kBlockRows, h, 0, NH, NKV, HS), q_s,
                               min(kBlockRows, T - q0));
  }
}

// Unpacked batches (doc_start null) run the kPacked = false kernels, compiled without any
// document code.
template <class Mma, int HS>
void launch_fwd(bf16* out, float* lse, const bf16* qkv, const int32_t* doc_start, int B, int T, int NH, int NKV,
                float scale, cudaStream_t stream) {
  const auto kernel = doc_start ? attention_fwd_mma_kernel<Mma, HS, true> : attention_fwd_mma_kernel<Mma, HS, false>;
  constexpr size_t smem = fwd_smem_bytes<Mma, HS>();
  allow_smem(kernel, smem);
  kernel<<<dim3(B * NH, ceil_div(T, kBlockRows)), kThreads, smem, stream>>>(out, lse, qkv, doc_start, T, NH, NKV,
                                                                            scale);
  CUDA_CHECK_LAUNCH("attention_fwd_mma_kernel");
}

template <class Mma, int HS>
void launch_bwd(bf16* dqkv, float* bias_partials, const bf16* dout, const bf16* qkv, const float* lse,
                const float* delta, const int32_t* doc_start, const float* rope, int B, int T, int NH, int NKV,
                float scale, const DkvParts& split, cudaStream_t stream) {
  const int blocks = ceil_div(T, kBlockRows);
  const auto dkv = doc_start ? attention_dkv_mma_kernel<Mma, HS, true> : attention_dkv_mma_kernel<Mma, HS, false>;
  allow_smem(dkv, dkv_smem_bytes<Mma, HS>());
  if (split.parts > 1)
    CUDA_CHECK(cudaMemsetAsync(split.arrivals, 0, attention_dkv_key_blocks(B, T, NKV) * sizeof(unsigned), stream));
  dkv<<<dim3(B * NKV * split.parts, blocks), kThreads, dkv_smem_bytes<Mma, HS>(), stream>>>(
      dqkv, bias_partials, dout, qkv, lse, delta, doc_start, rope, T, NH, NKV, scale, split);
  CUDA_CHECK_LAUNCH("attention_dkv_mma_kernel");
  const auto dq = doc_start ? attention_dq_mma_kernel<Mma, HS, true> : attention_dq_mma_kernel<Mma, HS, false>;
  allow_smem(dq, dq_smem_bytes<Mma, HS>());
  dq<<<dim3(B * NH, blocks), kThreads, dq_smem_bytes<Mma, HS>(), stream>>>(dqkv, bias_partials, dout, qkv, lse, delta,
                                                                           doc_start, rope, T, NH, NKV, scale);
  CUDA_CHECK_LAUNCH("attention_dq_mma_kernel");
}

// Writes whether this code was compiled with wgmma (sm_90a) for the device it runs on.
__global__ void wgmma_compiled_kernel(int* flag) { *flag = TRIDENT_WGMMA; }

// Whether the wgmma engine can run: the device is compute capability 9.0 and its machine code
// has the sm_90a instructions. Found once per process (one small launch and copy on the first call).
bool wgmma_available() {
  static const bool available = [] {
    int device = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (major != 9 || minor != 0) return false;
    int* flag = nullptr;
    int compiled = 0;
    CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
    wgmma_compiled_kernel<<<1, 1>>>(flag);
    CUDA_CHECK_LAUNCH("wgmma_compiled_kernel");
    CUDA_CHECK(cudaMemcpy(&compiled, flag, sizeof(int), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(flag));
    return compiled == 1;
  }();
  return available;
}

// The engine choose_attention_engine picked (before any backend: the mma.sync engine, which runs
// on every supported device).
struct Engine {
  bool wgmma = false;        // the wgmma engine, else mma.sync
  bool tma_forward = false;  // with wgmma: the warp-specialized forward of attention_tma.cu at HS 64
};
Engine g_engine;

bool use_wgmma() { return g_engine.wgmma; }
bool use_tma_forward() { return g_engine.tma_forward; }

// Packed sequences take the wgmma forward where the warp-specialized one would run: it has no
// document masking.
template <int HS>
void launch_fwd_any(bf16* out, float* lse, const bf16* qkv, const int32_t* doc_start, int B, int T, int NH, int NKV,
                    float scale, cudaStream_t stream) {
  if (HS == 64 && use_wgmma() && use_tma_forward() && !doc_start) {
    attention_fwd_tma(out, lse, qkv, B, T, NH, NKV, scale, stream);
  } else if (use_wgmma()) {
    launch_fwd<GroupMma, HS>(out, lse, qkv, doc_start, B, T, NH, NKV, scale, stream);
  } else {
    launch_fwd<WarpMma, HS>(out, lse, qkv, doc_start, B, T, NH, NKV, scale, stream);
  }
}

template <int HS>
void launch_bwd_any(bf16* dqkv, float* bias_partials, const bf16* dout, const bf16* qkv, const float* lse,
                    const float* delta, const int32_t* doc_start, const float* rope, int B, int T, int NH, int NKV,
                    float scale, const DkvParts& split, cudaStream_t stream) {
  if (use_wgmma()) {
    launch_bwd<GroupMma, HS>(dqkv, bias_partials, dout, qkv, lse, delta, doc_start, rope, B, T, NH, NKV, scale, split,
                             stream);
  } else {
    launch_bwd<WarpMma, HS>(dqkv, bias_partials, dout, qkv, lse, delta, doc_start, rope, B, T, NH, NKV, scale, split,
                            stream);
  }
}

int g_dkv_parts_at_most = 0;   // set_attention_dkv_parts (0: by shape)

}  // namespace

void choose_attention_engine(AttentionKernels kernels) {
  g_engine.wgmma = kernels != AttentionKernels::Mma && wgmma_available();
  g_engine.tma_forward = g_engine.wgmma && kernels != AttentionKernels::Wgmma && attention_fwd_tma_supported();
}

bool attention_mma_supported(int HS, std::initializer_list<const void*> tensors) {
  if (HS != 64 && HS != 128) return false;
  for (const void* p : tensors)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

void attention_fwd_mma(bf16* out, float* lse, const bf16* qkv, const int32_t* doc_start, int B, int T, int NH,
                       int NKV, int HS, cudaStream_t stream) {
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  if (HS == 64) {
    launch_fwd_any<64>(out, lse, qkv, doc_start, B, T, NH, NKV, scale, stream);
  } else {
    launch_fwd_any<128>(out, lse, qkv, doc_start, B, T, NH, NKV, scale, stream);
  }
}

void set_attention_dkv_parts(int at_most) { g_dkv_parts_at_most = at_most; }

int attention_dkv_parts(int B, int T, int NH, int NKV) {
  const int group = NH / NKV;
  if (g_dkv_parts_at_most > 0) {   // capped: the largest divisor of the group up to the cap
    int parts = 1;
    for (int p = 2; p <= std::min(group, g_dkv_parts_at_most); ++p)
      if (group % p == 0) parts = p;
    return parts;
  }
  // By shape. Shapes with two blocks per SM or more keep one block per group (their kernels and
  // bits as measured before the parts; whether splitting helps them is untested); the others take
  // the fewest parts that give four blocks per SM, at most the group.
  const long long per_part = static_cast<long long>(attention_dkv_key_blocks(B, T, NKV)), sms = multiprocessors();
  if (per_part >= 2 * sms) return 1;
  for (int p = 2; p <= group; ++p)
    if (group % p == 0 && (per_part * p >= 4 * sms || p == group)) return p;
  return 1;
}

size_t attention_dkv_partial_floats(int B, int T, int NKV, int HS, int parts) {
  if (parts <= 1) return 0;
  return attention_dkv_key_blocks(B, T, NKV) * parts * 2 * (HS / 8) * 4 * kThreads;
}

void attention_bwd_mma(bf16* dqkv, float* bias_partials, const bf16* dout, const bf16* qkv, const float* lse,
                       const float* delta, const int32_t* doc_start, const float* rope, int B, int T, int NH, int NKV,
                       int HS, const DkvParts& split, cudaStream_t stream) {
  TRIDENT_CHECK(split.parts >= 1 && (NH / NKV) % split.parts == 0 && (split.parts == 1 || (split.partials && split.arrivals)),
                str("attention_bwd_mma: ", split.parts, " parts of a group of ", NH / NKV, " query heads"));
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  if (HS == 64) {
    launch_bwd_any<64>(dqkv, bias_partials, dout, qkv, lse, delta, doc_start, rope, B, T, NH, NKV, scale, split,
                       stream);
  } else {
    launch_bwd_any<128>(dqkv, bias_partials, dout, qkv, lse, delta, doc_start, rope, B, T, NH, NKV, scale, split,
                        stream);
  }
}

}  // namespace trident::gpu
