// CpuBackend memory, copies and the (synchronous) stream; the make_cpu_backend() factory.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"
#include "trident/backend/cpu_backend.hpp"

namespace trident {

namespace {
constexpr size_t kAlignment = 64;  // a cache line; also enough for any vector load

void* aligned_zeroed(size_t bytes) {
  // aligned_alloc wants a size that is a multiple of the alignment (and not 0).
  const size_t rounded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (!p) TRIDENT_FATAL(str("cpu backend: out of host memory allocating ", bytes, " bytes"));
  std::memset(p, 0, rounded);
  return p;
}
}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

void* CpuBackend::alloc(size_t bytes) {
  void* p = aligned_zeroed(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  sizes_[p] = bytes;
  live_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return p;
}

void CpuBackend::release(void* p) {
  if (!p) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sizes_.find(p);
    TRIDENT_CHECK(it != sizes_.end(), "cpu backend: release() of a pointer alloc() did not return");
    live_bytes_ -= it->second;
    sizes_.erase(it);
  }
  std::free(p);
}

void* CpuBackend::alloc_host(size_t bytes) { return aligned_zeroed(bytes); }

void CpuBackend::release_host(void* p) { std::free(p); }

size_t CpuBackend::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_bytes_;
}

void CpuBackend::zero(TensorView t) {
  if (t.numel) std::memset(t.data, 0, t.bytes());
}

void CpuBackend::copy_to_host(void* dst, TensorView src) {
  if (src.numel) std::memcpy(dst, src.data, src.bytes());
}

void CpuBackend::copy_from_host(TensorView dst, const void* src) {
  if (dst.numel) std::memcpy(dst.data, src, dst.bytes());
}

void CpuBackend::copy(TensorView dst, TensorView src) {
  TRIDENT_CHECK(dst.numel == src.numel, str("copy: ", src.numel, " elements into ", dst.numel));
  const long n = static_cast<long>(src.numel);
  if (dst.dtype == src.dtype) {
    if (n) std::memmove(dst.data, src.data, src.bytes());
  } else if (dst.dtype == DType::BF16 && src.dtype == DType::F32) {
    uint16_t* d = dst.as<uint16_t>();
    const float* s = src.as<float>();
#pragma omp parallel for schedule(static) if (cpu::worth_threads(src.numel))
    for (long i = 0; i < n; ++i) d[i] = float_to_bf16(s[i]);
  } else if (dst.dtype == DType::F32 && src.dtype == DType::BF16) {
    float* d = dst.as<float>();
    const uint16_t* s = src.as<uint16_t>();
#pragma omp parallel for schedule(static) if (cpu::worth_threads(src.numel))
    for (long i = 0; i < n; ++i) d[i] = bf16_to_float(s[i]);
  } else {
    TRIDENT_FATAL(str("copy: no conversion from ", dtype_name(src.dtype), " to ", dtype_name(dst.dtype)));
  }
}

}  // namespace trident
