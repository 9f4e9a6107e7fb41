// CpuBackend token + position embedding over a vocab-parallel shard of wte.
#include <algorithm>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::f32_data;

namespace {

// The position table may hold more rows (the model's block size) than this batch's T uses.
float* positions(TensorView wpe, int T, int C, const char* what) {
  if (wpe.empty()) return nullptr;
  float* p = f32_data(wpe, wpe.numel, what);
  TRIDENT_CHECK(wpe.numel >= static_cast<size_t>(T) * C, str(what, " has ", wpe.numel, " elements, fewer than T*C"));
  return p;
}

// Channels per task of encoder_bwd: tasks own disjoint columns of dwte, so rows shared by
// repeated tokens are summed without atomics and always in token order.
constexpr int kChannelChunk = 32;

}  // namespace

void CpuBackend::encoder_fwd(TensorView out, const int32_t* tokens, TensorView wte, TensorView wpe,
                             int B, int T, int C, int vocab_start, int v_local, const int32_t* doc_start) {
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  float* o = f32_data(out, NC, "encoder_fwd: out");                                      // (B, T, C)
  const float* e = f32_data(wte, static_cast<size_t>(v_local) * C, "encoder_fwd: wte");  // (v_local, C)
  const float* p = positions(wpe, T, C, "encoder_fwd: wpe");                             // (T, C)
  TRIDENT_CHECK(tokens != nullptr, "encoder_fwd: tokens not given");
  cpu::check_doc_start(doc_start, B, T, "encoder_fwd");
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NC))
  for (int n = 0; n < N; ++n) {
    float* row = o + static_cast<size_t>(n) * C;
    int local = tokens[n] - vocab_start;
    if (local >= 0 && local < v_local) {
      std::copy(e + static_cast<size_t>(local) * C, e + static_cast<size_t>(local + 1) * C, row);
    } else {
      std::fill(row, row + C, 0.0f);
    }
    if (p) {
      const float* pos = p + static_cast<size_t>(cpu::doc_position(doc_start, n, T)) * C;
      for (int c = 0; c < C; ++c) row[c] += pos[c];
    }
  }
}

void CpuBackend::encoder_bwd(TensorView dwte, TensorView dwpe, TensorView dout, const int32_t* tokens,
                             int B, int T, int C, int vocab_start, int v_local, const int32_t* doc_start) {
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  float* de = f32_data(dwte, static_cast<size_t>(v_local) * C, "encoder_bwd: dwte");  // (v_local, C)
  float* dp = positions(dwpe, T, C, "encoder_bwd: dwpe");                             // (T, C)
  const float* g = f32_data(dout, NC, "encoder_bwd: dout");                           // (B, T, C)
  TRIDENT_CHECK(tokens != nullptr, "encoder_bwd: tokens not given");
  cpu::check_doc_start(doc_start, B, T, "encoder_bwd");

  const int n_chunks = (C + kChannelChunk - 1) / kChannelChunk;
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NC))
  for (int chunk = 0; chunk < n_chunks; ++chunk) {
    const int c0 = chunk * kChannelChunk, c1 = std::min(C, c0 + kChannelChunk);
    for (int n = 0; n < N; ++n) {
      int local = tokens[n] - vocab_start;
      if (local < 0 || local >= v_local) continue;
      float* d = de + static_cast<size_t>(local) * C;
      const float* s = g + static_cast<size_t>(n) * C;
      for (int c = c0; c < c1; ++c) d[c] += s[c];
    }
  }
  if (!dp) return;
  // As dwte's: tasks own columns, and each position's rows are summed in row order (b ascending
  // for an unpacked batch).
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NC))
  for (int chunk = 0; chunk < n_chunks; ++chunk) {
    const int c0 = chunk * kChannelChunk, c1 = std::min(C, c0 + kChannelChunk);
    for (int n = 0; n < N; ++n) {
      float* d = dp + static_cast<size_t>(cpu::doc_position(doc_start, n, T)) * C;
      const float* s = g + static_cast<size_t>(n) * C;
      for (int c = c0; c < c1; ++c) d[c] += s[c];
    }
  }
}

}  // namespace trident
