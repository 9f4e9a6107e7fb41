// Hopper's asynchronous data movement and warp specialization (sm_90a) as inline functions:
// mbarriers with transaction counts, TMA tensor copies between global and shared memory,
// named barriers and register reallocation between warpgroups.
//
// Code compiled for any other target gets traps in place of the waits and copies, and nothing
// in place of the rest (wgmma.cuh's rule): the host launches the kernels that use them only
// where the wgmma engine runs.
#pragma once

#include <cstdint>

#include "mma.cuh"
#include "wgmma.cuh"

namespace trident::gpu {

// An mbarrier completes a phase when `count` arrivals have been made and every byte announced
// with expect_tx has landed; waits name the parity of the phase they wait for. A fresh barrier
// is in phase 0, so waiting for parity 1 returns at once: producers start waiting on their
// "empty" barriers with parity 1 and the first pass through a ring does not block.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
#if TRIDENT_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count) : "memory");
#endif
}

// Makes the initialised barriers visible to the TMA unit; a block-wide barrier must follow.
__device__ __forceinline__ void mbarrier_init_fence() {
#if TRIDENT_WGMMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// One arrival that also announces `bytes` more to land before the phase can complete.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if TRIDENT_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
#if TRIDENT_WGMMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
#endif
}

// Returns once the phase of the given parity has completed (with acquire semantics: what the
// arrivals and the landed bytes wrote is visible after it).
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#if TRIDENT_WGMMA
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(shared_address(bar)),
      "r"(parity)
      : "memory");
#else
  __trap();
#endif
}

// Copies the box of a 4-d tensor map at coordinates c (innermost first) into shared memory at
// dst (1024-byte aligned for 128-byte swizzle); the bytes count against bar's transaction.
// Elements outside the tensor land as zeros.
__device__ __forceinline__ void tma_load_4d(void* dst, const void* tensor_map, uint64_t* bar, int c0, int c1, int c2,
                                            int c3) {
#if TRIDENT_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];\n" ::"r"(shared_address(dst)),
      "l"(tensor_map), "r"(shared_address(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#else
  __trap();
#endif
}

// Copies shared memory at src to the box of a 4-d tensor map at coordinates c; elements
// outside the tensor are not written. Part of this thread's current bulk group.
__device__ __forceinline__ void tma_store_4d(const void* tensor_map, const void* src, int c0, int c1, int c2, int c3) {
#if TRIDENT_WGMMA
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   tensor_map),
               "r"(shared_address(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void bulk_commit() {
#if TRIDENT_WGMMA
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}

// Waits until this thread's committed bulk stores have read their shared memory.
__device__ __forceinline__ void bulk_wait_read() {
#if TRIDENT_WGMMA
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}

// Barrier `id` (1..15; 0 is __syncthreads) over `threads` threads, a multiple of 32.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Register reallocation between the warpgroups of a block: every warp of a warpgroup executes
// it with the same count (a multiple of 8 in [24, 256]).
template <int kRegisters>
__device__ __forceinline__ void release_registers() {
#if TRIDENT_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}

template <int kRegisters>
__device__ __forceinline__ void claim_registers() {
#if TRIDENT_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}

}  // namespace trident::gpu
