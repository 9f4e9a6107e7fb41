// CpuBackend LayerNorm: statistics and column sums accumulate in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::f32_data;

namespace {
// Channels per task of the dw/db column sums; tasks own disjoint columns, rows run in order.
constexpr int kChannelChunk = 32;
}  // namespace

void CpuBackend::layernorm_fwd(TensorView out, TensorView mean, TensorView rstd, TensorView in,
                               TensorView w, TensorView b, int N, int C, float eps) {
  const size_t NC = static_cast<size_t>(N) * C;
  float* o = f32_data(out, NC, "layernorm_fwd: out");      // (N, C)
  float* mu = f32_data(mean, N, "layernorm_fwd: mean");    // (N)
  float* rs = f32_data(rstd, N, "layernorm_fwd: rstd");    // (N)
  const float* x = f32_data(in, NC, "layernorm_fwd: in");  // (N, C)
  const float* wt = f32_data(w, C, "layernorm_fwd: w");    // (C)
  const float* bs = f32_data(b, C, "layernorm_fwd: b");    // (C)
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NC))
  for (int n = 0; n < N; ++n) {
    const float* xr = x + static_cast<size_t>(n) * C;
    double s = 0;
    for (int c = 0; c < C; ++c) s += xr[c];
    const double m = s / C;
    double v = 0;  // two-pass variance: no cancellation for rows with a large mean
    for (int c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
    mu[n] = static_cast<float>(m);
    rs[n] = static_cast<float>(1.0 / std::sqrt(v / C + eps));
    // Normalize with the stored fp32 statistics, exactly as the backward pass will.
    const float mf = mu[n], rf = rs[n];
    float* orow = o + static_cast<size_t>(n) * C;
    for (int c = 0; c < C; ++c) orow[c] = (xr[c] - mf) * rf * wt[c] + bs[c];
  }
}

void CpuBackend::add_layernorm_fwd(TensorView sum, TensorView out, TensorView mean, TensorView rstd, TensorView a,
                                   TensorView a_peer, TensorView residual, TensorView w, TensorView b, int N, int C,
                                   float eps, PeerRelease release) {
  TRIDENT_CHECK(!release, "add_layernorm_fwd: the CPU backend cannot free a partial itself");
  if (!a_peer.empty()) {
    add(sum, a, a_peer);
    a = sum;
  }
  add_layernorm_fwd(sum, out, mean, rstd, a, residual, w, b, N, C, eps);
}

void CpuBackend::layernorm_bwd(TensorView din_accum, TensorView dw, TensorView db, TensorView dsum,
                               TensorView dout, TensorView dout_peer, TensorView in, TensorView w, TensorView mean,
                               TensorView rstd, int N, int C, PeerRelease release) {
  TRIDENT_CHECK(!release, "layernorm_bwd: the CPU backend cannot free a partial itself");
  const size_t NC = static_cast<size_t>(N) * C;
  float* dx = f32_data(din_accum, NC, "layernorm_bwd: din_accum");  // (N, C)
  float* dwt = f32_data(dw, C, "layernorm_bwd: dw");                // (C)
  float* dbs = f32_data(db, C, "layernorm_bwd: db");                // (C)
  float* dss = cpu::f32_optional(dsum, C, "layernorm_bwd: dsum");   // (C)
  const float* g = f32_data(dout, NC, "layernorm_bwd: dout");       // (N, C)
  std::vector<float> summed;   // (N, C) dout + dout_peer, the pair's sum
  if (!dout_peer.empty()) {
    const float* gp = f32_data(dout_peer, NC, "layernorm_bwd: dout_peer");
    summed.resize(NC);
    for (size_t i = 0; i < NC; ++i) summed[i] = g[i] + gp[i];
    g = summed.data();
  }
  const float* x = f32_data(in, NC, "layernorm_bwd: in");           // (N, C)
  const float* wt = f32_data(w, C, "layernorm_bwd: w");             // (C)
  const float* mu = f32_data(mean, N, "layernorm_bwd: mean");       // (N)
  const float* rs = f32_data(rstd, N, "layernorm_bwd: rstd");       // (N)

  // din += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = dout * w.
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NC))
  for (int n = 0; n < N; ++n) {
    const float* xr = x + static_cast<size_t>(n) * C;
    const float* gr = g + static_cast<size_t>(n) * C;
    const float m = mu[n], r = rs[n];
    double s_dnorm = 0, s_dnorm_norm = 0;
    for (int c = 0; c < C; ++c) {
      const float dnorm = gr[c] * wt[c];
      s_dnorm += dnorm;
      s_dnorm_norm += static_cast<double>(dnorm) * ((xr[c] - m) * r);
    }
    const float mean_dnorm = static_cast<float>(s_dnorm / C);
    const float mean_dnorm_norm = static_cast<float>(s_dnorm_norm / C);
    float* dr = dx + static_cast<size_t>(n) * C;
    for (int c = 0; c < C; ++c) {
      const float norm = (xr[c] - m) * r;
      dr[c] += r * (gr[c] * wt[c] - mean_dnorm - norm * mean_dnorm_norm);
    }
  }

  // dw += sum_n dout * norm, db += sum_n dout.
  const int n_chunks = (C + kChannelChunk - 1) / kChannelChunk;
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NC))
  for (int chunk = 0; chunk < n_chunks; ++chunk) {
    const int c0 = chunk * kChannelChunk, c1 = std::min(C, c0 + kChannelChunk);
    double sw[kChannelChunk] = {}, sb[kChannelChunk] = {}, ss[kChannelChunk] = {};
    for (int n = 0; n < N; ++n) {
      const float* xr = x + static_cast<size_t>(n) * C;
      const float* gr = g + static_cast<size_t>(n) * C;
      const float* dr = dx + static_cast<size_t>(n) * C;
      const float m = mu[n], r = rs[n];
      for (int c = c0; c < c1; ++c) {
        sw[c - c0] += static_cast<double>(gr[c]) * ((xr[c] - m) * r);
        sb[c - c0] += gr[c];
        ss[c - c0] += dr[c];
      }
    }
    for (int c = c0; c < c1; ++c) {
      dwt[c] += static_cast<float>(sw[c - c0]);
      dbs[c] += static_cast<float>(sb[c - c0]);
      if (dss) dss[c] += static_cast<float>(ss[c - c0]);
    }
  }
}

}  // namespace trident
