// AdamW's per-element arithmetic in fp32, shared by the CPU backend's op and the host optimizer of
// parallel.offload_optimizer so that the two produce the same bits.
#pragma once

#include <algorithm>
#include <cmath>

#include "trident/backend/backend.hpp"

namespace trident {

// The factor that clip_grad_norm_ scales gradients by: min(1, clip / (norm + 1e-6)), norm the
// square root of norm_sq (the squared global gradient norm); 1 without clipping (clip <= 0).
inline float clip_factor(float norm_sq, float clip) {
  if (clip <= 0) return 1.0f;
  return std::min(1.0f, clip / (std::sqrt(norm_sq) + 1e-6f));
}

// The per-step constants of AdamW (PyTorch's order of operations).
struct AdamWTerms {
  float decay;       // 1 - lr * weight_decay
  float step_size;   // lr / (1 - beta1^t)
  float bc2_sqrt;    // sqrt(1 - beta2^t)
  explicit AdamWTerms(const AdamWArgs& a)
      : decay(1.0f - a.lr * a.weight_decay), step_size(a.lr / a.bias_correction1),
        bc2_sqrt(std::sqrt(a.bias_correction2)) {}
};

// One element: updates the master weight w and the moments m1, m2 from the gradient g; returns w.
inline float adamw_element(float& w, float& m1, float& m2, float g, const AdamWArgs& a, const AdamWTerms& k) {
  const float gi = g * a.grad_scale;
  m1 = a.beta1 * m1 + (1.0f - a.beta1) * gi;
  m2 = a.beta2 * m2 + (1.0f - a.beta2) * gi * gi;
  const float denom = std::sqrt(m2) / k.bc2_sqrt + a.eps;
  w = w * k.decay - k.step_size * (m1 / denom);
  return w;
}

}  // namespace trident
