// Helpers shared by the CPU op files: argument checks that name the op and argument, and the
// lane-split dot product every fp32 inner product of this backend goes through.
#pragma once

#include <cstddef>
#include <cstdint>

#include "trident/core/error.hpp"
#include "trident/core/tensor.hpp"

namespace trident::cpu {

// Data of a fp32 tensor that must hold exactly n elements.
inline float* f32_data(TensorView t, size_t n, const char* what) {
  TRIDENT_CHECK(t.dtype == DType::F32, str(what, " is ", dtype_name(t.dtype), "; the cpu backend computes in fp32"));
  TRIDENT_CHECK(t.numel == n, str(what, " has ", t.numel, " elements, expected ", n));
  TRIDENT_CHECK(n == 0 || t.data != nullptr, str(what, " is not given"));
  return t.as<float>();
}

// As f32_data for an optional argument: nullptr when the view is empty.
inline float* f32_optional(TensorView t, size_t n, const char* what) {
  return t.empty() ? nullptr : f32_data(t, n, what);
}

// Loops with less work than this (elements, or multiply-adds) stay on the calling thread: a
// parallel region costs microseconds, far more on a busy machine. Results are the same either way.
inline bool worth_threads(size_t work) { return work >= (size_t{1} << 15); }

// Independent partial sums per inner product: without -ffast-math the compiler may only
// vectorize a reduction whose lanes are written out, and the fixed lane order keeps the bits
// independent of the thread count.
constexpr int kLanes = 8;

// Folds the lanes pairwise in a fixed order.
inline float reduce_lanes(float* acc) {
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

// sum_k a[k] * b[k]; the n % kLanes tail goes to the first lanes.
inline float dot(const float* a, const float* b, int n) {
  float acc[kLanes] = {};
  int k = 0;
  for (; k + kLanes <= n; k += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[k + l] * b[k + l];
  for (int l = 0; k < n; ++k, ++l) acc[l] += a[k] * b[k];
  return reduce_lanes(acc);
}

// Checks doc_start (B, T) of packed sequences (backend.hpp): each row starts a document at 0, and
// every position either starts a new one or continues the previous position's. nullptr passes.
inline void check_doc_start(const int32_t* doc_start, int B, int T, const char* op) {
  if (!doc_start) return;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const int32_t d = doc_start[static_cast<size_t>(b) * T + t];
      TRIDENT_CHECK(d == t || (t > 0 && d == doc_start[static_cast<size_t>(b) * T + t - 1]),
                    str(op, ": doc_start of sequence ", b, " position ", t, " is ", d,
                        "; a position starts a document or continues the previous one's"));
    }
}

// Position in its document of row n (b T + t) of a (B, T) batch.
inline int doc_position(const int32_t* doc_start, int n, int T) { return n % T - (doc_start ? doc_start[n] : 0); }

}  // namespace trident::cpu
