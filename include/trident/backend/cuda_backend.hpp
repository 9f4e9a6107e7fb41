// CudaBackend factory: bf16 parameters and activations, fp32 gradients and optimizer state.
// Host-only header (no CUDA includes), so apps and tests can pick the backend at run time.
#pragma once

#include <memory>

#include "trident/backend/backend.hpp"

namespace trident {

// The tensor-core attention kernels: Auto (the wgmma engine where the device is compute
// capability 9.0 and the build has sm_90a code, with the warp-specialized forward at head size
// 64; mma.sync elsewhere), Wgmma (the wgmma engine's single-warpgroup forward), Mma (mma.sync).
enum class AttentionKernels { Auto, Wgmma, Mma };

// The cuBLASLt workspace the backend's GEMMs share, allocated with the backend outside alloc()
// (what cuBLASLt's Hopper kernels ask for); the planner counts it.
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

// Switches for comparisons and debugging (the [cuda] options); the defaults are the fast path.
// The attention kernels, attention_dkv_parts and sync_launches hold for the whole process: the
// newest backend's win.
struct CudaOptions {
  AttentionKernels attention_kernels = AttentionKernels::Auto;
  int attention_dkv_parts = 0;  // at most this many parts of a group's query heads per dK/dV block; 0 = by shape
  bool side_stream = true;      // false: side ops queued in order on the main stream
  bool graphs = true;           // false: make_replay() gives a plain replay (every op queued each run)
  bool gemm_autotune = true;    // false: cuBLASLt's heuristic first choice for every GEMM
  bool gemm_log = false;        // print each GEMM shape's candidates, their times and the choice
  bool sync_launches = false;   // drain the device after every kernel, so a fault names its launch
};

// A backend on CUDA device `device` with its own non-blocking compute stream; fatal() when the
// device does not exist.
std::unique_ptr<Backend> make_cuda_backend(int device, const CudaOptions& options = {});

// Visible CUDA devices; 0 (never an abort) when there is no driver or no GPU.
int cuda_device_count();

// Memory of CUDA device `device` in bytes; 0 where it cannot be read. From the device's
// properties, which unlike cudaMemGetInfo create no context on the device.
size_t cuda_device_memory_bytes(int device);

// Memory in use and in all on the current device (cudaMemGetInfo: the CUDA context, NCCL's buffers
// and every allocation included); false where it cannot be read.
bool cuda_memory_in_use(size_t* used, size_t* total);

}  // namespace trident
