// CpuBackend's per-token policy loss of online RL (Backend::policy_loss), in double as the host
// reference of train/rl_loss.cpp.
#include <algorithm>
#include <cmath>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::f32_data;
using cpu::f32_optional;

void CpuBackend::policy_loss(TensorView acc, TensorView weights, TensorView nll, TensorView old_logp, TensorView coef,
                             TensorView coef_adv, TensorView ref_nll, TensorView entropy_sums, int N,
                             const PolicyArgs& a) {
  const size_t n = static_cast<size_t>(N);
  float* out = f32_data(acc, 5, "policy_loss: acc");
  float* w = f32_optional(weights, n, "policy_loss: weights");
  const float* x = f32_data(nll, n, "policy_loss: nll");
  const float* old = f32_data(old_logp, n, "policy_loss: old_logp");
  const float* c = f32_data(coef, n, "policy_loss: coef");
  const float* ca = f32_data(coef_adv, n, "policy_loss: coef_adv");
  const float* ref = a.kl_beta != 0 ? f32_data(ref_nll, n, "policy_loss: ref_nll") : nullptr;
  const float* es = f32_optional(entropy_sums, 2 * n, "policy_loss: entropy_sums");
  double sums[4] = {0, 0, 0, 0};
  for (size_t t = 0; t < n; ++t) {
    if (c[t] == 0) {
      if (w) w[t] = 0;
      continue;
    }
    // coef >= 0 scales both branches of the minimum alike: min(rho cA, clip(rho) cA) = coef min(rho A, clip(rho) A).
    const double rho = std::exp(-static_cast<double>(x[t]) - old[t]);
    const double unclipped = rho * ca[t], clipped = std::clamp(rho, 1.0 - a.clip_eps, 1.0 + a.clip_eps) * ca[t];
    const bool is_clipped = clipped < unclipped;   // the gradient of the clipped branch is 0
    double loss = -std::min(unclipped, clipped), dnll = is_clipped ? 0.0 : unclipped;   // d(-rho cA)/dnll = rho cA
    if (ref) {
      const double d = static_cast<double>(x[t]) - ref[t], e = std::exp(d);
      loss += a.kl_beta * c[t] * (e - d - 1);
      dnll += a.kl_beta * c[t] * (e - 1);
      sums[2] += e - d - 1;
    }
    sums[0] += loss;
    sums[1] += is_clipped;
    if (es) sums[3] += std::log(static_cast<double>(es[2 * t])) - static_cast<double>(es[2 * t + 1]) / es[2 * t];
    if (w) w[t] = static_cast<float>(a.scale * dnll);
  }
  for (int k = 0; k < 4; ++k) out[k] += static_cast<float>(sums[k]);
}

}  // namespace trident
