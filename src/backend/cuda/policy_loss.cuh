// Online RL's per-token policy loss (see Backend::policy_loss).
#pragma once

#include "common.cuh"
#include "trident/backend/backend.hpp"

namespace trident::gpu {

// Backend::policy_loss; weights, ref_nll and entropy_sums may be null. One block: the sums over
// tokens are added in an order fixed by N.
void policy_loss(float* acc, float* weights, const float* nll, const float* old_logp, const float* coef,
                 const float* coef_adv, const float* ref_nll, const float* entropy_sums, int N, const PolicyArgs& a,
                 cudaStream_t stream);

}  // namespace trident::gpu
