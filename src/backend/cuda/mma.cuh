// Warp-level tensor-core and asynchronous-copy instructions (sm_80+) as inline functions: bf16
// mma.sync m16n8k16 with fp32 accumulators, ldmatrix fragment loads, cp.async tile copies.
#pragma once

#include <cstring>

#include "common.cuh"

namespace trident::gpu {

// Fragment layouts (PTX ISA, "matrix fragments for mma.m16n8k16"), lane = 4 g + t:
//  A (16 x 16, row-major), 4 registers of 2 bf16: {row g, cols 2t, 2t+1}, {row g+8, same cols},
//    {row g, cols 2t+8, 2t+9}, {row g+8, cols 2t+8, 2t+9}.
//  B (16 x 8, k x n), 2 registers: {k 2t, 2t+1; n g}, {k 2t+8, 2t+9; n g}.
//  C, D (16 x 8 fp32), 4 registers: {row g, cols 2t, 2t+1}, {row g+8, cols 2t, 2t+1}.
// ldmatrix .x4 loads four 8 x 8 bf16 matrices: lanes 8i..8i+7 give the addresses of the 8 rows
// of matrix i (16 contiguous bytes each), and register i of lane 4g+t receives row g, columns
// 2t and 2t+1 of matrix i (of its transpose with .trans). The lower column sits in the low half.

// The four lanes of a row group (lane = 4 g + t) hold parts of the same two accumulator rows
// (g and g + 8): each of this lane's partial row sums l becomes the row's total, and inv its
// reciprocal.
__device__ __forceinline__ void row_totals(float (&l)[2], float (&inv)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(kFullMask, l[r], 1);
    l[r] += __shfl_xor_sync(kFullMask, l[r], 2);
    inv[r] = 1.0f / l[r];
  }
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The first byte at or after raw (dynamic shared memory) on a kAlign-byte boundary of the
// shared address space; launches ask for at least kAlign - 16 bytes more than their tiles take.
template <int kAlign>
__device__ __forceinline__ unsigned char* align_shared(unsigned char* raw) {
  const uint32_t misalign = shared_address(raw) % kAlign;
  return raw + (misalign == 0 ? 0 : kAlign - misalign);
}

// `row` is this lane's row address (see above); shared memory, 16-byte aligned.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

// d (16 x 8) += a (16 x 16) b (16 x 8), bf16 products summed in fp32.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to bf16 (nearest even) in one register, `lo` in the low half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  uint32_t bits;
  memcpy(&bits, &h, sizeof(bits));
  return bits;
}

// Packs two n8 accumulator tiles (one k16 slice of P) into the A fragment of an m16n8k16 product.
template <int kKTiles>
__device__ __forceinline__ void pack_probs(uint32_t (&a)[4], const float (&p)[kKTiles][4], int kk) {
  a[0] = pack_bf16x2(p[2 * kk][0], p[2 * kk][1]);
  a[1] = pack_bf16x2(p[2 * kk][2], p[2 * kk][3]);
  a[2] = pack_bf16x2(p[2 * kk + 1][0], p[2 * kk + 1][1]);
  a[3] = pack_bf16x2(p[2 * kk + 1][2], p[2 * kk + 1][3]);
}

// 16 bytes from global to shared memory without passing through registers; 16 zero bytes
// (and no read of src) when !valid. Both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}

// 4 bytes, or a zero when !valid.
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}

// Closes the group of copies issued so far by this thread.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until every copy this thread issued has landed (other threads' copies need a barrier).
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace trident::gpu
