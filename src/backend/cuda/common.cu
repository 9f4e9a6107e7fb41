// Error text, launch checks and the scratch buffer shared by the CUDA op files.
#include "common.cuh"

namespace trident::gpu {
namespace {

// cuda.sync_launches: drain the device after every kernel so that an asynchronous fault is
// reported by the launch that caused it (slow; for debugging only).
bool g_sync_after_launch = false;

}  // namespace

void set_sync_after_launch(bool on) { g_sync_after_launch = on; }
bool sync_after_launch() { return g_sync_after_launch; }

int multiprocessors() {
  static const int count = [] {
    int device = 0, n = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
  }();
  return count;
}

size_t max_smem_per_block() {
  static const size_t bytes = [] {
    int device = 0, n = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return static_cast<size_t>(n);
  }();
  return bytes;
}

std::string cuda_error_text(cudaError_t err) { return str(cudaGetErrorName(err), ": ", cudaGetErrorString(err)); }

void check_launch(const char* file, int line, const char* kernel_name) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess && g_sync_after_launch) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) fatal(file, line, kernel_name, cuda_error_text(err));
}

Scratch::~Scratch() {
  // Destructors must not abort; a failure here only leaks memory at teardown.
  if (ptr_) static_cast<void>(cudaFree(ptr_));
}

void* Scratch::get(size_t bytes, cudaStream_t stream) {
  if (bytes <= bytes_) return ptr_;
  if (ptr_) {
    // Kernels queued earlier may still read the old buffer.
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaFree(ptr_));
    ptr_ = nullptr;
    bytes_ = 0;
  }
  cudaError_t err = cudaMalloc(&ptr_, bytes);
  if (err != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // out-of-memory is not sticky; clear it
    size_t free_bytes = 0, total_bytes = 0;
    static_cast<void>(cudaMemGetInfo(&free_bytes, &total_bytes));
    fatal(__FILE__, __LINE__, "cudaMalloc(scratch)",
          str(cuda_error_text(err), " requesting ", bytes, " bytes of op scratch; ", free_bytes, " of ", total_bytes,
              " bytes free"));
  }
  bytes_ = bytes;
  ++growths_;
  return ptr_;
}

}  // namespace trident::gpu
