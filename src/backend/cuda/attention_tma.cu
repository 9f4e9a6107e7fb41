// Causal attention forward at head size 64 on Hopper, warp-specialized (FlashAttention-3's
// structure): one producer warpgroup streams Q, K and V tiles with TMA into a ring of stages
// guarded by mbarriers, and two consumer warpgroups, holding most of the registers, run the
// products and the softmax, each issuing the next tile's scores before this tile's softmax.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>
#include <vector>

#include "attention_tma.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

namespace trident::gpu {
namespace {

constexpr int kHS = 64;
constexpr int kConsumers = 2;                     // consumer warpgroups per block
constexpr int kGroupRows = 64;                    // query rows per consumer warpgroup
constexpr int kQueryRows = kConsumers * kGroupRows;  // query rows per work item
constexpr int kKeyRows = 128;                     // keys per stage
static_assert(kKeyRows == kQueryRows, "a work item's last key tile is its only diagonal one");
constexpr int kStages = 4;
constexpr int kThreads = 128 * (1 + kConsumers);
// The producer needs few registers; the consumers hold the scores (64 per thread), the output
// accumulator (32) and the probabilities as bf16 fragments (32). 128 * 40 + 256 * 232 fits the
// 65,536 registers of a multiprocessor, as 384 threads at the 168 they start with do.
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr int kTileElems = kKeyRows * kHS;  // a Q, K or V tile of 128 rows
constexpr uint32_t kTileBytes = kTileElems * sizeof(bf16);
// Each warp of each consumer warpgroup releases a stage once its products have read it.
constexpr uint32_t kReleases = kConsumers * 4;
constexpr float kRescaleLog2 = 8.0f;  // lazy rescaling threshold, as in attention_mma.cu

// Shared memory of a block; every tile starts on a 1024-byte boundary (128-byte swizzle).
struct Smem {
  bf16 q[2][kTileElems];                       // (128, HS) queries of two work items
  bf16 k[kStages][kTileElems];                 // (128, HS) keys per stage
  bf16 v[kStages][kTileElems];                 // (128, HS) values per stage
  bf16 out[kConsumers][kGroupRows * kHS];      // (64, HS) output of each consumer, to store
  uint64_t q_full[2], q_empty[2];
  uint64_t k_full[kStages], k_empty[kStages], v_full[kStages], v_empty[kStages];
};
constexpr size_t kSmemBytes = sizeof(Smem) + kSwizzleAtomBytes;  // with room to align

// Work items are (b, query head h, 128-query block), longest first: blocks take items blockIdx.x,
// blockIdx.x + gridDim.x, ..., so every round of the grid gets items of about equal length. The
// heads of a key/value group are adjacent items, which run at the same time and find its tiles
// in L2.
struct WorkItem {
  int b, h, q0;
  __device__ WorkItem(int item, int BH, int NH, int q_blocks) {
    const int bh = item % BH;
    b = bh / NH;
    h = bh % NH;
    q0 = (q_blocks - 1 - item / BH) * kQueryRows;
  }
  __device__ int key_tiles() const { return q0 / kKeyRows + 1; }
};

// Position in the ring of stages; the phase flips every time the ring wraps.
struct Ring {
  int stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// Lane 0 of each consumer warp arrives once the warp is past the wait that completed the
// products reading the stage.
__device__ __forceinline__ void release(uint64_t* bar, int lane) {
  if (lane == 0) mbarrier_arrive(bar);
}

// s (64, 128) = Q K^T for this warpgroup's 64 queries and a tile of 128 keys, issued and
// committed (the caller waits).
__device__ __forceinline__ void issue_scores(float (&s)[16][4], const bf16* q_s, const bf16* k_s) {
  wgmma_fence_operands(s);  // the softmax's reads of s come before the products overwrite it
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kHS / 16; ++kk)
    wgmma_ss_m64n128k16(s, wgmma_k_major<kQueryRows>(q_s, kk), wgmma_k_major<kKeyRows>(k_s, kk), kk > 0);
  wgmma_commit();
}

// o (64, HS) += P V for P (64, 128) in bf16 fragments and a tile of 128 values, issued and
// committed. V is the N-major B operand.
__device__ __forceinline__ void issue_values(float (&o)[kHS / 8][4], uint32_t (&a)[8][4], const bf16* v_s) {
  // The rescaling of o and the packing of a are complete before the fence (not scheduled
  // between it and the products, which read those registers asynchronously).
  wgmma_fence_operands(o);
  wgmma_fence_fragments(a);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kKeyRows / 16; ++kk)
    wgmma_rs_m64n64k16(o, a[kk], wgmma_n_major<kKeyRows>(v_s, kk));
  wgmma_commit();
}

__device__ __forceinline__ void pack_probabilities(uint32_t (&a)[8][4], const float (&p)[16][4]) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) pack_probs<16>(a[kk], p, kk);
}

// The largest score of each of this lane's two rows in the tile (the four lanes of a row
// group share the row).
__device__ __forceinline__ void row_max(float (&mx)[2], const float (&s)[16][4]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float v = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) v = fmaxf(v, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
    mx[r] = fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
  }
}

// s becomes exp(scale (s - m)) per row; l gains this lane's share of each row's sum.
__device__ __forceinline__ void exponentiate(float (&s)[16][4], float (&l)[2], const float (&m)[2],
                                             float scale_log2) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float offset = m[r] * scale_log2;
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 16; ++nt)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        s[nt][e] = fast_exp2(fmaf(s[nt][e], scale_log2, -offset));
        sum += s[nt][e];
      }
    l[r] += sum;
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    attention_fwd_tma_kernel(const __grid_constant__ CUtensorMap qkv_map, const __grid_constant__ CUtensorMap out_map,
                             float* lse, int B, int T, int NH, int NKV, float scale) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(align_shared<kSwizzleAtomBytes>(smem_raw));
  const int group = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  const int BH = B * NH, q_blocks = (T + kQueryRows - 1) / kQueryRows, items = BH * q_blocks;

  if (threadIdx.x == 0) {
    for (int i = 0; i < 2; ++i) {
      mbarrier_init(&s.q_full[i], 1);
      mbarrier_init(&s.q_empty[i], kReleases);
    }
    for (int i = 0; i < kStages; ++i) {
      mbarrier_init(&s.k_full[i], 1);
      mbarrier_init(&s.k_empty[i], kReleases);
      mbarrier_init(&s.v_full[i], 1);
      mbarrier_init(&s.v_empty[i], kReleases);
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  if (group == 0) {  // the producer: one thread issues every copy
    release_registers<kProducerRegisters>();
    if (threadIdx.x != 0) return;
    Ring ring;
    int n = 0;
    for (int item = blockIdx.x; item < items; item += gridDim.x, ++n) {
      const WorkItem w(item, BH, NH, q_blocks);
      const int qb = n % 2, key_head = NH + w.h / (NH / NKV), value_head = key_head + NKV;  // in a qkv row
      mbarrier_wait(&s.q_empty[qb], ((n / 2) & 1) ^ 1);
      mbarrier_arrive_expect_tx(&s.q_full[qb], kTileBytes);
      tma_load_4d(s.q[qb], &qkv_map, &s.q_full[qb], 0, w.h, w.q0, w.b);
      // Key tiles from the diagonal one down, so that only the first needs the causal mask.
      for (int j = w.key_tiles() - 1; j >= 0; --j, ring.advance()) {
        mbarrier_wait(&s.k_empty[ring.stage], ring.phase ^ 1);
        mbarrier_arrive_expect_tx(&s.k_full[ring.stage], kTileBytes);
        tma_load_4d(s.k[ring.stage], &qkv_map, &s.k_full[ring.stage], 0, key_head, j * kKeyRows, w.b);
        mbarrier_wait(&s.v_empty[ring.stage], ring.phase ^ 1);
        mbarrier_arrive_expect_tx(&s.v_full[ring.stage], kTileBytes);
        tma_load_4d(s.v[ring.stage], &qkv_map, &s.v_full[ring.stage], 0, value_head, j * kKeyRows, w.b);
      }
    }
    return;
  }

  claim_registers<kConsumerRegisters>();
  const int c = group - 1;  // this consumer's 64 rows of each work item
  const bool leader = warp == 0 && lane == 0;  // issues the group's output stores
  const float scale_log2 = scale * kLog2e;
  Ring ring;
  int n = 0;
  for (int item = blockIdx.x; item < items; item += gridDim.x, ++n) {
    const WorkItem w(item, BH, NH, q_blocks);
    const int qb = n % 2, n_tiles = w.key_tiles();
    const int row0 = w.q0 + c * kGroupRows;
    // This lane's accumulator elements 0, 1 belong to query row_lo, elements 2, 3 to row_lo + 8.
    const int row_lo = row0 + warp * 16 + lane / 4;
    const bf16* q_s = s.q[qb] + c * kGroupRows * kHS;
    mbarrier_wait(&s.q_full[qb], (n / 2) & 1);

    // The diagonal tile: scores, the causal mask (it also hides keys >= T), the first maxima.
    float p[16][4], m[2], l[2] = {0.0f, 0.0f};
    mbarrier_wait(&s.k_full[ring.stage], ring.phase);
    issue_scores(p, q_s, s.k[ring.stage]);
    wgmma_wait_pending<0>();
    wgmma_fence_operands(p);
    release(&s.k_empty[ring.stage], lane);
    if (n_tiles == 1) release(&s.q_empty[qb], lane);
    const int k_diag = (n_tiles - 1) * kKeyRows;
#pragma unroll
    for (int nt = 0; nt < 16; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (k_diag + nt * 8 + (lane % 4) * 2 + e % 2 > row_lo + 8 * (e / 2)) p[nt][e] = -INFINITY;
    row_max(m, p);  // finite: key k_diag <= every row of the item
    exponentiate(p, l, m, scale_log2);

    float o[kHS / 8][4] = {};
    uint32_t a[8][4];
    Ring values = ring;  // the stage whose values the probabilities in p multiply
    ring.advance();
    for (int j = n_tiles - 2; j >= 0; --j, ring.advance()) {
      // The next tile's scores go to the tensor cores first, then P V of this one; the softmax of
      // the next tile runs while P V is still on them.
      pack_probabilities(a, p);
      mbarrier_wait(&s.k_full[ring.stage], ring.phase);
      issue_scores(p, q_s, s.k[ring.stage]);
      mbarrier_wait(&s.v_full[values.stage], values.phase);
      issue_values(o, a, s.v[values.stage]);
      wgmma_wait_pending<1>();
      wgmma_fence_operands(p);
      release(&s.k_empty[ring.stage], lane);
      if (j == 0) release(&s.q_empty[qb], lane);

      // Lazy rescaling (attention_mma.cu): exponentials against the row maximum of the last
      // rescale until some row of the warp outgrows it by 2^kRescaleLog2.
      float mx[2], correction[2] = {1.0f, 1.0f};
      row_max(mx, p);
      const bool grow = (mx[0] - m[0]) * scale_log2 > kRescaleLog2 || (mx[1] - m[1]) * scale_log2 > kRescaleLog2;
      const bool rescale = __any_sync(kFullMask, grow);
      if (rescale) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float m_new = fmaxf(m[r], mx[r]);
          correction[r] = fast_exp2((m[r] - m_new) * scale_log2);
          l[r] *= correction[r];
          m[r] = m_new;
        }
      }
      exponentiate(p, l, m, scale_log2);
      wgmma_wait_pending<0>();
      wgmma_fence_operands(o);
      wgmma_fence_fragments(a);
      release(&s.v_empty[values.stage], lane);
      if (rescale) {
#pragma unroll
        for (int dt = 0; dt < kHS / 8; ++dt)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[dt][e] *= correction[e / 2];
      }
      values = ring;
    }
    pack_probabilities(a, p);
    mbarrier_wait(&s.v_full[values.stage], values.phase);
    issue_values(o, a, s.v[values.stage]);
    wgmma_wait_pending<0>();
    wgmma_fence_operands(o);
    wgmma_fence_fragments(a);
    release(&s.v_empty[values.stage], lane);

    float inv_l[2];
    row_totals(l, inv_l);
    // The output goes through this consumer's staging tile (swizzled as the tensor map expects)
    // and one bulk store; the previous item's store must have read the tile first.
    if (leader) bulk_wait_read();
    named_barrier_sync(1 + c, 128);
    bf16* staging = s.out[c];
#pragma unroll
    for (int dt = 0; dt < kHS / 8; ++dt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = warp * 16 + lane / 4 + 8 * r;
        *reinterpret_cast<__nv_bfloat162*>(staging + swizzled_offset<kGroupRows>(row, dt) + (lane % 4) * 2) =
            __floats2bfloat162_rn(o[dt][2 * r] * inv_l[r], o[dt][2 * r + 1] * inv_l[r]);
      }
    fence_proxy_async_shared();
    named_barrier_sync(1 + c, 128);
    if (leader && row0 < T) {
      tma_store_4d(&out_map, staging, 0, w.h, row0, w.b);
      bulk_commit();
    }
    if (lane % 4 == 0) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int qi = row_lo + 8 * r;
        if (qi < T) lse[(static_cast<size_t>(w.b) * NH + w.h) * T + qi] = m[r] * scale + logf(l[r]);
      }
    }
  }
  if (leader) bulk_wait_read();  // the staging tile stays until the last store has read it
}

// ---------------------------------------------------------------- tensor maps

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const auto fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || f == nullptr)
      fatal(__FILE__, __LINE__, "cuTensorMapEncodeTiled", "the CUDA driver does not provide it (driver too old)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A tensor map of bf16 elements, dims innermost first, byte strides of dims 1.., 128-byte
// swizzled boxes (the box's inner dimension is 64 elements: one 128-byte row).
template <int kRank>
CUtensorMap encode_map(const void* base, const cuuint64_t (&dims)[kRank], const cuuint64_t (&strides)[kRank - 1],
                       const cuuint32_t (&box)[kRank]) {
  CUtensorMap map;
  cuuint32_t element_strides[kRank];
  for (int i = 0; i < kRank; ++i) element_strides[i] = 1;
  const CUresult res = encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, kRank, const_cast<void*>(base), dims,
                                      strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (res != CUDA_SUCCESS)
    fatal(__FILE__, __LINE__, "cuTensorMapEncodeTiled", "error " + std::to_string(static_cast<int>(res)));
  return map;
}

// The maps of one call's tensors. Encoding is host work without a device call, but it is a
// descriptor: the maps of each (tensor, shape) are kept, so that steady-state steps, which
// reuse the same activation buffers, create none.
struct Maps {
  const void* qkv;
  const void* out;
  int B, T, NH, NKV;
  CUtensorMap qkv_map, out_map;
};

Maps maps_for(const bf16* qkv, bf16* out, int B, int T, int NH, int NKV) {
  static std::vector<Maps> cache;
  for (const Maps& m : cache)
    if (m.qkv == qkv && m.out == out && m.B == B && m.T == T && m.NH == NH && m.NKV == NKV) return m;
  constexpr size_t kMaxMaps = 256;  // more than any model's layers; a bound for odd callers
  if (cache.size() == kMaxMaps) cache.clear();
  const cuuint64_t e = sizeof(bf16), heads = NH + 2 * NKV;
  // qkv (B, T, NH + 2 NKV, HS) as dims (HS, NH + 2 NKV, T, B); boxes of (64, 1, 128 rows, 1).
  const CUtensorMap qkv_map = encode_map<4>(qkv, {kHS, heads, cuuint64_t(T), cuuint64_t(B)},
                                            {kHS * e, heads * kHS * e, cuuint64_t(T) * heads * kHS * e},
                                            {kHS, 1, kKeyRows, 1});
  // out (B, T, NH, HS) as dims (HS, NH, T, B); boxes of (64, 1, 64 rows, 1).
  const CUtensorMap out_map = encode_map<4>(out, {kHS, cuuint64_t(NH), cuuint64_t(T), cuuint64_t(B)},
                                            {kHS * e, NH * kHS * e, cuuint64_t(T) * NH * kHS * e}, {kHS, 1, kGroupRows, 1});
  cache.push_back({qkv, out, B, T, NH, NKV, qkv_map, out_map});
  return cache.back();
}

// The consumers' setmaxnreg.inc waits for registers the block does not have (forever) unless
// the kernel starts with enough for both groups' final counts: at most 65,536 / 384 rounded down
// to 8 per thread (what ptxas gives a one-block kernel of 384 threads), checked here, and what
// this build's ptxas gave, checked by attention_fwd_tma_supported().
static_assert(128 * kProducerRegisters + 128 * kConsumers * kConsumerRegisters <= 65536 / kThreads / 8 * 8 * kThreads,
              "the warpgroups' register counts exceed what a block of kThreads threads starts with");

}  // namespace

bool attention_fwd_tma_supported() {
  static const bool registers_suffice = [] {
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, attention_fwd_tma_kernel));
    return attr.numRegs * kThreads >= 128 * kProducerRegisters + 128 * kConsumers * kConsumerRegisters;
  }();
  return registers_suffice;
}

void attention_fwd_tma(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, int NKV, float scale,
                       cudaStream_t stream) {
  const Maps maps = maps_for(qkv, out, B, T, NH, NKV);
  const int items = B * NH * ((T + kQueryRows - 1) / kQueryRows);
  const int blocks = items < multiprocessors() ? items : multiprocessors();
  allow_smem(attention_fwd_tma_kernel, kSmemBytes);
  attention_fwd_tma_kernel<<<blocks, kThreads, kSmemBytes, stream>>>(maps.qkv_map, maps.out_map, lse, B, T, NH, NKV,
                                                                      scale);
  CUDA_CHECK_LAUNCH("attention_fwd_tma_kernel");
}

}  // namespace trident::gpu
