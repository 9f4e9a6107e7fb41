// Hopper warpgroup matrix multiply (wgmma, sm_90a) as inline functions: shared-memory matrix
// descriptors for 128-byte-swizzled tiles, the fences and waits around the asynchronous
// instruction, and the bf16 shapes the attention kernels use (fp32 accumulators).
//
// Code compiled for any other target gets traps in place of the instructions; callers check
// wgmma_available() on the host before launching a kernel that uses them.
#pragma once

#include <cstdint>

#include "mma.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TRIDENT_WGMMA 1
#else
#define TRIDENT_WGMMA 0
#endif

namespace trident::gpu {

// 128-byte swizzle (the only layout used here): a tile is stored as panels of 64 bf16 columns;
// in a panel every row takes 128 bytes, and the 16-byte chunk c of row r sits at chunk position
// c ^ (r % 8). Panels, and the tile, start on 1024-byte boundaries (the swizzle repeats every
// 8 rows and the hardware applies it to absolute shared addresses).
constexpr int kSwizzleBytes = 128;
constexpr int kSwizzleAtomBytes = 8 * kSwizzleBytes;

// Element offset of 16-byte chunk c of row r in a 128-byte-swizzled bf16 tile of kRows rows.
template <int kRows>
__device__ __forceinline__ int swizzled_offset(int r, int c) {
  return ((c / 8) * kRows + r) * 64 + ((c % 8) ^ (r % 8)) * 8;
}

// Descriptor of a shared-memory operand (PTX ISA, "matrix descriptor format"): start address,
// leading- and stride-dimension byte offsets, all in 16-byte units, and the swizzle mode.
// K-major operands: the stride offset steps 8 rows (one swizzle atom); the leading offset is
// unused. N-major operands: the stride offset steps 8 rows along K, the leading offset steps
// to the next 64-column panel along N.
__device__ __forceinline__ uint64_t wgmma_desc(const void* smem, uint32_t leading_bytes, uint32_t stride_bytes) {
  constexpr uint64_t kSwizzle128 = 1;
  return static_cast<uint64_t>((shared_address(smem) & 0x3FFFF) >> 4) |
         static_cast<uint64_t>((leading_bytes >> 4) & 0x3FFF) << 16 |
         static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFF) << 32 | kSwizzle128 << 62;
}

// Descriptor of k16 slice kk of a K-major operand, a tile of kRows rows in swizzled_offset's
// layout: 4 slices per 64-column panel, 32 bytes apart.
template <int kRows>
__device__ __forceinline__ uint64_t wgmma_k_major(const bf16* tile, int kk) {
  return wgmma_desc(tile + (kk / 4) * kRows * 64 + (kk % 4) * 16, 16, kSwizzleAtomBytes);
}

// Descriptor of k16 slice kk of an N-major operand, a tile of kRows rows along K in
// swizzled_offset's layout: the slice starts 16 rows down; the next 64 columns along N are one
// panel (kRows rows of 128 bytes) away.
template <int kRows>
__device__ __forceinline__ uint64_t wgmma_n_major(const bf16* tile, int kk) {
  return wgmma_desc(tile + kk * 16 * 64, kRows * kSwizzleBytes, kSwizzleAtomBytes);
}

// Orders this thread's register writes (accumulators, A fragments) before the next wgmma.
__device__ __forceinline__ void wgmma_fence() {
#if TRIDENT_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

// Closes the group of wgmma issued so far by the warpgroup.
__device__ __forceinline__ void wgmma_commit() {
#if TRIDENT_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

// Waits until every committed group has completed (its accumulators are written and its
// shared-memory operands read).
__device__ __forceinline__ void wgmma_wait() {
#if TRIDENT_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}

// Waits until at most N committed groups are still running: the oldest ones have completed.
template <int N>
__device__ __forceinline__ void wgmma_wait_pending() {
#if TRIDENT_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// Makes this thread's generic-proxy shared-memory writes (including cp.async copies that have
// landed) visible to the async proxy (wgmma's operand reads, bulk copies out of shared memory);
// a barrier must follow for other threads' writes.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if TRIDENT_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Keeps the compiler from moving reads or writes of accumulator registers across the
// asynchronous instruction: each element is treated as rewritten at this point.
template <int N>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}

// Keeps the compiler from reusing the registers of an A fragment that a running wgmma reads:
// called after the wait that completes it.
template <int N>
__device__ __forceinline__ void wgmma_fence_fragments(uint32_t (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[i][e])::"memory");
}

// The output operands of an (N / 8, 4) fp32 accumulator d in wgmma's register order, for the
// inline assembly below (one list per accumulator width).
#define TRIDENT_WGMMA_ROW(d, i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define TRIDENT_WGMMA_ACC4(d) \
  TRIDENT_WGMMA_ROW(d, 0), TRIDENT_WGMMA_ROW(d, 1), TRIDENT_WGMMA_ROW(d, 2), TRIDENT_WGMMA_ROW(d, 3)
#define TRIDENT_WGMMA_ACC8(d) \
  TRIDENT_WGMMA_ACC4(d), TRIDENT_WGMMA_ROW(d, 4), TRIDENT_WGMMA_ROW(d, 5), TRIDENT_WGMMA_ROW(d, 6), TRIDENT_WGMMA_ROW(d, 7)
#define TRIDENT_WGMMA_ACC16(d)                                                                                  \
  TRIDENT_WGMMA_ACC8(d), TRIDENT_WGMMA_ROW(d, 8), TRIDENT_WGMMA_ROW(d, 9), TRIDENT_WGMMA_ROW(d, 10),            \
      TRIDENT_WGMMA_ROW(d, 11), TRIDENT_WGMMA_ROW(d, 12), TRIDENT_WGMMA_ROW(d, 13), TRIDENT_WGMMA_ROW(d, 14), \
      TRIDENT_WGMMA_ROW(d, 15)

// d (64 x 64) = A B^T + (accumulate ? d : 0): A (64 x 16) and B (64 x 16) both K-major in shared
// memory.
__device__ __forceinline__ void wgmma_ss_m64n64k16(float (&d)[8][4], uint64_t a_desc, uint64_t b_desc,
                                                   bool accumulate) {
#if TRIDENT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : TRIDENT_WGMMA_ACC8(d)
      : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)));
#else
  __trap();
#endif
}

// d (64 x 32) = A B^T + (accumulate ? d : 0): A (64 x 16) and B (32 x 16) both K-major in shared
// memory.
__device__ __forceinline__ void wgmma_ss_m64n32k16(float (&d)[4][4], uint64_t a_desc, uint64_t b_desc,
                                                   bool accumulate) {
#if TRIDENT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : TRIDENT_WGMMA_ACC4(d)
      : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)));
#else
  __trap();
#endif
}

// d (64 x 128) = A B^T + (accumulate ? d : 0): A (64 x 16) and B (128 x 16) both K-major in shared
// memory.
__device__ __forceinline__ void wgmma_ss_m64n128k16(float (&d)[16][4], uint64_t a_desc, uint64_t b_desc,
                                                    bool accumulate) {
#if TRIDENT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : TRIDENT_WGMMA_ACC16(d)
      : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)));
#else
  __trap();
#endif
}

// d (64 x 64) += A B: A (64 x 16) from registers in the mma.m16n8k16 A layout (warp w of the
// group holds rows 16w..16w+15), B (16 x 64) N-major in shared memory.
__device__ __forceinline__ void wgmma_rs_m64n64k16(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b_desc) {
#if TRIDENT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : TRIDENT_WGMMA_ACC8(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
#else
  __trap();
#endif
}

// d (64 x 128) += A B: A (64 x 16) from registers in the mma.m16n8k16 A layout (warp w of the
// group holds rows 16w..16w+15), B (16 x 128) N-major in shared memory.
__device__ __forceinline__ void wgmma_rs_m64n128k16(float (&d)[16][4], const uint32_t (&a)[4], uint64_t b_desc) {
#if TRIDENT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : TRIDENT_WGMMA_ACC16(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
#else
  __trap();
#endif
}

}  // namespace trident::gpu
