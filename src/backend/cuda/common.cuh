// Shared by the CUDA op files: checks that route every CUDA/cuBLAS error to fatal(), bf16 and
// reduction helpers, and the grow-only scratch buffer that keeps allocations off the op path.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "trident/core/arena.hpp"
#include "trident/core/error.hpp"

#define CUDA_CHECK(stmt)                                                                             \
  do {                                                                                               \
    cudaError_t cuda_check_err_ = (stmt);                                                            \
    if (cuda_check_err_ != cudaSuccess)                                                              \
      ::trident::fatal(__FILE__, __LINE__, #stmt, ::trident::gpu::cuda_error_text(cuda_check_err_)); \
  } while (0)

#define CUBLAS_CHECK(stmt)                                                                        \
  do {                                                                                            \
    cublasStatus_t cublas_check_status_ = (stmt);                                                 \
    if (cublas_check_status_ != CUBLAS_STATUS_SUCCESS)                                            \
      ::trident::fatal(__FILE__, __LINE__, #stmt, cublasLtGetStatusString(cublas_check_status_)); \
  } while (0)

// After every kernel launch: a bad launch configuration is reported at its launch site, and
// with TRIDENT_CUDA_SYNC=1 a fault inside the kernel is too (the device is drained after it).
#define CUDA_CHECK_LAUNCH(kernel_name) ::trident::gpu::check_launch(__FILE__, __LINE__, kernel_name)

namespace trident::gpu {

using bf16 = __nv_bfloat16;

constexpr unsigned kFullMask = 0xffffffffu;

std::string cuda_error_text(cudaError_t err);
void check_launch(const char* file, int line, const char* kernel_name);

inline int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

// Blocks for a grid-stride loop over n elements: a function of n only, so that reductions
// built on it group elements identically on every GPU.
inline int grid_for(size_t n, int threads, int max_blocks) {
  const long long blocks = (static_cast<long long>(n) + threads - 1) / threads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}

__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ bf16 to_bf16(float x) { return __float2bfloat16_rn(x); }

// Butterfly reductions: every lane ends with the same value, combined in a fixed order.
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// Block-wide reduction returned to every thread; blockDim.x must be a multiple of 32 and at
// most 1024. `shared` holds 32 floats and may be reused by the next call.
template <bool kMax>
__device__ float block_reduce(float v, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // the previous call's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float r = lane < n_warps ? shared[lane] : (kMax ? -INFINITY : 0.0f);
  return kMax ? warp_max(r) : warp_sum(r);
}

__device__ __forceinline__ float block_sum(float v, float* shared) { return block_reduce<false>(v, shared); }
__device__ __forceinline__ float block_max(float v, float* shared) { return block_reduce<true>(v, shared); }

// Device scratch for the temporaries of one op (sort buffers, partial sums). It grows when a
// larger shape first appears and never shrinks, so the steady state allocates nothing. Ops
// run in order on one stream, so consecutive ops can share it.
class Scratch {
 public:
  Scratch() = default;
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // At least `bytes` of device memory, valid until the next get().
  void* get(size_t bytes, cudaStream_t stream);

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Carves aligned typed pieces out of a scratch allocation: measure with a null base, then
// carve the same pieces again from the real one.
class Carver {
 public:
  explicit Carver(void* base = nullptr) : base_(reinterpret_cast<uintptr_t>(base)) {}
  template <class T>
  T* take(size_t n) {
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ = ArenaPlan::round_up(used_ + n * sizeof(T), ArenaPlan::kAlign);
    return p;
  }
  size_t used() const { return used_; }

 private:
  uintptr_t base_;
  size_t used_ = 0;
};

}  // namespace trident::gpu
