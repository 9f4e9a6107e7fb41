// CpuBackend RMSNorm (Llama): row statistics and dw column sums accumulate in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::f32_data;

namespace {
// Channels per task of the dw column sums; tasks own disjoint columns, rows run in order.
constexpr int kChannelChunk = 32;
}  // namespace

void CpuBackend::rmsnorm_fwd(TensorView out, TensorView rstd, TensorView in, TensorView w, int N, int C, float eps) {
  const size_t NC = static_cast<size_t>(N) * C;
  float* o = f32_data(out, NC, "rmsnorm_fwd: out");      // (N, C)
  float* rs = f32_data(rstd, N, "rmsnorm_fwd: rstd");    // (N)
  const float* x = f32_data(in, NC, "rmsnorm_fwd: in");  // (N, C)
  const float* wt = f32_data(w, C, "rmsnorm_fwd: w");    // (C)
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NC))
  for (int n = 0; n < N; ++n) {
    const float* xr = x + static_cast<size_t>(n) * C;
    double ss = 0;
    for (int c = 0; c < C; ++c) ss += static_cast<double>(xr[c]) * xr[c];
    rs[n] = static_cast<float>(1.0 / std::sqrt(ss / C + eps));
    // Normalize with the stored fp32 statistic, exactly as the backward pass will.
    const float r = rs[n];
    float* orow = o + static_cast<size_t>(n) * C;
    for (int c = 0; c < C; ++c) orow[c] = xr[c] * r * wt[c];
  }
}

void CpuBackend::add_rmsnorm_fwd(TensorView sum, TensorView out, TensorView rstd, TensorView a, TensorView a_peer,
                                 TensorView residual, TensorView w, int N, int C, float eps, PeerRelease release) {
  TRIDENT_CHECK(!release, "add_rmsnorm_fwd: the CPU backend cannot free a partial itself");
  if (!a_peer.empty()) {
    add(sum, a, a_peer);
    a = sum;
  }
  add_rmsnorm_fwd(sum, out, rstd, a, residual, w, N, C, eps);
}

void CpuBackend::rmsnorm_bwd(TensorView din_accum, TensorView dw, TensorView dout, TensorView dout_peer, TensorView in,
                             TensorView w, TensorView rstd, int N, int C, PeerRelease release) {
  TRIDENT_CHECK(!release, "rmsnorm_bwd: the CPU backend cannot free a partial itself");
  if (dout_peer.empty()) {
    rmsnorm_bwd(din_accum, dw, dout, in, w, rstd, N, C);
    return;
  }
  std::vector<float> summed(static_cast<size_t>(N) * C);   // (N, C) dout + dout_peer, the pair's sum
  const TensorView pair(summed.data(), DType::F32, summed.size());
  add(pair, dout, dout_peer);
  rmsnorm_bwd(din_accum, dw, pair, in, w, rstd, N, C);
}

void CpuBackend::rmsnorm_bwd(TensorView din_accum, TensorView dw, TensorView dout, TensorView in, TensorView w,
                             TensorView rstd, int N, int C, TensorView din_keep) {
  keep_before_update(din_keep, din_accum, "rmsnorm_bwd");
  const size_t NC = static_cast<size_t>(N) * C;
  float* dx = f32_data(din_accum, NC, "rmsnorm_bwd: din_accum");  // (N, C)
  float* dwt = f32_data(dw, C, "rmsnorm_bwd: dw");                // (C)
  const float* g = f32_data(dout, NC, "rmsnorm_bwd: dout");       // (N, C)
  const float* x = f32_data(in, NC, "rmsnorm_bwd: in");           // (N, C)
  const float* wt = f32_data(w, C, "rmsnorm_bwd: w");             // (C)
  const float* rs = f32_data(rstd, N, "rmsnorm_bwd: rstd");       // (N)
  TRIDENT_CHECK(dx != g && dx != x, "rmsnorm_bwd: din_accum must not alias dout or in");

  // din += rstd * (dnorm - norm * mean(dnorm * norm)), dnorm = dout * w, norm = in * rstd.
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NC))
  for (int n = 0; n < N; ++n) {
    const float* xr = x + static_cast<size_t>(n) * C;
    const float* gr = g + static_cast<size_t>(n) * C;
    const float r = rs[n];
    double s_dnorm_norm = 0;
    for (int c = 0; c < C; ++c) s_dnorm_norm += static_cast<double>(gr[c] * wt[c]) * (xr[c] * r);
    const float mean_dnorm_norm = static_cast<float>(s_dnorm_norm / C);
    float* dr = dx + static_cast<size_t>(n) * C;
    for (int c = 0; c < C; ++c) dr[c] += r * (gr[c] * wt[c] - xr[c] * r * mean_dnorm_norm);
  }

  // dw += sum_n dout * norm.
  const int n_chunks = (C + kChannelChunk - 1) / kChannelChunk;
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NC))
  for (int chunk = 0; chunk < n_chunks; ++chunk) {
    const int c0 = chunk * kChannelChunk, c1 = std::min(C, c0 + kChannelChunk);
    double sw[kChannelChunk] = {};
    for (int n = 0; n < N; ++n) {
      const float* xr = x + static_cast<size_t>(n) * C;
      const float* gr = g + static_cast<size_t>(n) * C;
      const float r = rs[n];
      for (int c = c0; c < c1; ++c) sw[c - c0] += static_cast<double>(gr[c]) * (xr[c] * r);
    }
    for (int c = c0; c < c1; ++c) dwt[c] += static_cast<float>(sw[c - c0]);
  }
}

}  // namespace trident
