// Value head of task ppo's value model: a value at every position and PPO's clipped value loss
// (forward and backward; semantics in backend.hpp, Backend::value_fwd / value_bwd).
#pragma once

#include "common.cuh"
#include "trident/backend/backend.hpp"

namespace trident::gpu {

// values (N) = lnf[n] . w; with coef (N) given, acc (5) += [losses, clipped positions, coef (v - R)^2]
// and dvalues (N), when not null, = a.scale * d(loss)/d(v).
void value_fwd(float* values, float* dvalues, float* acc, const bf16* lnf, const bf16* w, const float* old_values,
               const float* returns, const float* coef, int N, int C, const ValueArgs& a, cudaStream_t stream);

// dlnf (N, C) = dvalues[n] * w; dw (C) += sum_n dvalues[n] lnf[n].
void value_bwd(bf16* dlnf, float* dw, const float* dvalues, const bf16* lnf, const bf16* w, int N, int C,
               cudaStream_t stream);

}  // namespace trident::gpu
