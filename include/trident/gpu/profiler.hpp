// GPU time of named regions of a stream, measured with CUDA events: the per-op breakdown of
// `trident bench --bench.profile`. Off by default; while off, a region costs one branch.
// Host-only (no device code) and below both the CUDA backend and the NCCL communicator, so the
// communicator's waits are timed in the backend's profile.
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <string>
#include <vector>

#include "trident/core/op_time.hpp"

namespace trident::gpu {

class Profiler {
 public:
  static Profiler& instance();

  bool enabled() const { return enabled_; }
  void enable(bool on) { enabled_ = on; }
  // Marks the start of a region on `stream`; -1 while disabled.
  int begin(cudaStream_t stream);
  // Ends region `token` (from begin) on `stream` and names it.
  void end(int token, cudaStream_t stream, std::string name);
  // Waits for the recorded regions, sums them by name (largest first) and forgets them.
  std::vector<OpTime> take();

 private:
  Profiler() = default;
  int record(cudaStream_t stream);

  struct Region {
    std::string name;
    int begin, end;
  };
  bool enabled_ = false;
  std::mutex mutex_;
  std::vector<cudaEvent_t> events_;   // grows while profiling; reused by later profiles
  size_t used_ = 0;
  std::vector<Region> regions_;
};

// A region for the lifetime of this object: ProfileScope t(stream, "matmul_fwd", N, K, M).
// The name (with the non-zero sizes appended) is only built while profiling.
class ProfileScope {
 public:
  ProfileScope(cudaStream_t stream, const char* op, long a = 0, long b = 0, long c = 0)
      : stream_(stream), op_(op), a_(a), b_(b), c_(c), token_(Profiler::instance().begin(stream)) {}
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  cudaStream_t stream_;
  const char* op_;
  long a_, b_, c_;
  int token_;
};

}  // namespace trident::gpu
