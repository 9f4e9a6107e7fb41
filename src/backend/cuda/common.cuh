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
// with cuda.sync_launches = true a fault inside the kernel is too (the device is drained after it).
#define CUDA_CHECK_LAUNCH(kernel_name) ::trident::gpu::check_launch(__FILE__, __LINE__, kernel_name)

namespace trident::gpu {

using bf16 = __nv_bfloat16;

constexpr unsigned kFullMask = 0xffffffffu;

std::string cuda_error_text(cudaError_t err);
// Streaming multiprocessors of the first device asked (all of a process's devices are alike).
int multiprocessors();
// The most dynamic shared memory a block may ask for (allow_smem) on that device.
size_t max_smem_per_block();
void check_launch(const char* file, int line, const char* kernel_name);
// Whether check_launch waits for each kernel (cuda.sync_launches), for the whole process.
void set_sync_after_launch(bool on);
bool sync_after_launch();

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

constexpr float kLog2e = 1.4426950408889634f;

// 2^x as one special-function instruction (ex2.approx with flush-to-zero). exp2f() without
// -ftz compiles to four: a range test and two multiplies keep results below 2^-126 from being
// flushed. The softmax and cross-entropy loops issue one per score or logit, next to a few other
// instructions, so the extra three are a large share of their work; results that small vanish
// against the row's largest term (1) anyway. Callers write e^y as fast_exp2(y * kLog2e), with
// the multiply folded into a fused multiply-add where they can.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

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

// Vectorized access: kWidth consecutive elements moved as fp32 values. kWidth = kVec = 8 is one
// 16-byte access per 8 bf16 (two per 8 floats) and needs 16-byte aligned addresses; kWidth = 1
// is the scalar path for rows whose length or address does not allow that.
constexpr int kVec = 8;

template <int kWidth>
__device__ __forceinline__ void load_vec(float (&v)[kWidth], const bf16* p) {
  static_assert(kWidth == 1 || kWidth == kVec, "one element or one 16-byte access");
  if constexpr (kWidth == kVec) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < kWidth / 2; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      v[2 * i] = f.x;
      v[2 * i + 1] = f.y;
    }
  } else {
    v[0] = to_float(*p);
  }
}

template <int kWidth>
__device__ __forceinline__ void load_vec(float (&v)[kWidth], const float* p) {
  static_assert(kWidth == 1 || kWidth == kVec, "one element or two 16-byte accesses");
  if constexpr (kWidth == kVec) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
    v[0] = *p;
  }
}

// Rounds to bf16 (nearest even, as to_bf16) and stores.
template <int kWidth>
__device__ __forceinline__ void store_vec(bf16* p, const float (&v)[kWidth]) {
  static_assert(kWidth == 1 || kWidth == kVec, "one element or one 16-byte access");
  if constexpr (kWidth == kVec) {
    uint4 raw;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < kWidth / 2; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
    *p = to_bf16(v[0]);
  }
}

template <int kWidth>
__device__ __forceinline__ void store_vec(float* p, const float (&v)[kWidth]) {
  static_assert(kWidth == 1 || kWidth == kVec, "one element or two 16-byte accesses");
  if constexpr (kWidth == kVec) {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    *p = v[0];
  }
}

// Eight bf16 held as they were loaded (16 bytes), unpacked to fp32 where used: the norm
// backward kernels keep a row's dout, input and residual gradient in flight together in 12
// registers per 8 columns.
struct Raw8 {
  uint4 bits;
  __device__ void load(const bf16* p) { bits = *reinterpret_cast<const uint4*>(p); }
  __device__ void store(bf16* p) const { *reinterpret_cast<uint4*>(p) = bits; }
  __device__ float operator[](int k) const {
    const uint32_t word = (&bits.x)[k / 2];
    return __uint_as_float(k % 2 ? word & 0xffff0000u : word << 16);
  }
  // this = bf16(this + o), elementwise.
  __device__ void add_rounded(const Raw8& o) {
    uint32_t words[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t lo = __bfloat16_as_ushort(to_bf16((*this)[2 * i] + o[2 * i]));
      const uint32_t hi = __bfloat16_as_ushort(to_bf16((*this)[2 * i + 1] + o[2 * i + 1]));
      words[i] = lo | hi << 16;
    }
    bits = make_uint4(words[0], words[1], words[2], words[3]);
  }
};

// True when every pointer (null ones included) starts on a 16-byte boundary.
template <class... P>
bool aligned16(const P*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}

// Elements [0, n_vec) of an n-element range go in kVec-wide pieces, the rest one by one: n_vec
// is n rounded down to kVec when every pointer allows 16-byte accesses, else 0.
template <class... P>
size_t vector_prefix(size_t n, const P*... p) {
  return aligned16(p...) ? n / kVec * kVec : 0;
}

// Kernels with more than 48 KiB of dynamic shared memory must ask for it first. The setting is
// per device and cheap, so launchers call this before every launch.
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

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
  long growths() const { return growths_; }   // allocations made so far

 private:
  long growths_ = 0;
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
