// CpuBackend value head of task ppo's value model: a value at every position and PPO's clipped
// value loss (Backend::value_fwd / value_bwd), the loss in double as train/rl_loss.cpp's reference.
#include <algorithm>
#include <cmath>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::f32_data;
using cpu::f32_optional;

void CpuBackend::value_fwd(TensorView values, TensorView dvalues, TensorView acc, TensorView lnf, TensorView w,
                           TensorView old_values, TensorView returns, TensorView coef, int N, int C,
                           const ValueArgs& a) {
  const size_t n = static_cast<size_t>(N);
  float* v = f32_data(values, n, "value_fwd: values");                                     // (N)
  const float* x = f32_data(lnf, n * C, "value_fwd: lnf");                                 // (N, C)
  const float* wv = f32_data(w, C, "value_fwd: w");                                        // (C)
  for (size_t i = 0; i < n; ++i) v[i] = cpu::dot(x + i * C, wv, C);
  const float* c = f32_optional(coef, n, "value_fwd: coef");
  if (!c) return;
  float* out = f32_data(acc, 5, "value_fwd: acc");
  float* dv = f32_optional(dvalues, n, "value_fwd: dvalues");
  const float* old = f32_data(old_values, n, "value_fwd: old_values");
  const float* ret = f32_data(returns, n, "value_fwd: returns");
  double sums[3] = {0, 0, 0};
  for (size_t i = 0; i < n; ++i) {
    if (c[i] == 0) {
      if (dv) dv[i] = 0;
      continue;
    }
    const double vi = v[i], vo = old[i], R = ret[i];
    const double v_clip = vo + std::clamp(vi - vo, -static_cast<double>(a.clip), static_cast<double>(a.clip));
    const double plain = (vi - R) * (vi - R), clipped = (v_clip - R) * (v_clip - R);
    // The clipped branch carries a gradient only while v - v_old is inside the range (where it
    // equals the plain one).
    const bool use_clipped = clipped > plain, inside = std::abs(vi - vo) < a.clip;
    sums[0] += c[i] * 0.5 * std::max(plain, clipped);
    sums[1] += use_clipped;
    sums[2] += c[i] * plain;
    if (dv) dv[i] = static_cast<float>(a.scale * c[i] * (use_clipped ? (inside ? v_clip - R : 0.0) : vi - R));
  }
  for (int k = 0; k < 3; ++k) out[k] += static_cast<float>(sums[k]);
}

void CpuBackend::value_bwd(TensorView dlnf, TensorView dw, TensorView dvalues, TensorView lnf, TensorView w, int N,
                           int C) {
  const size_t n = static_cast<size_t>(N);
  float* dx = f32_data(dlnf, n * C, "value_bwd: dlnf");              // (N, C)
  float* dwv = f32_data(dw, C, "value_bwd: dw");                     // (C)
  const float* dv = f32_data(dvalues, n, "value_bwd: dvalues");      // (N)
  const float* x = f32_data(lnf, n * C, "value_bwd: lnf");           // (N, C)
  const float* wv = f32_data(w, C, "value_bwd: w");                  // (C)
  for (size_t i = 0; i < n; ++i)
    for (int k = 0; k < C; ++k) {
      dx[i * C + k] = dv[i] * wv[k];
      dwv[k] += dv[i] * x[i * C + k];
    }
}

}  // namespace trident
