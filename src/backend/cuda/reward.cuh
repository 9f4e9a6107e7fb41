// Reward head: each sequence's score at its last token and the pairwise Bradley-Terry loss
// (forward and backward; semantics in backend.hpp, Backend::reward_fwd / reward_bwd).
#pragma once

#include "common.cuh"

namespace trident::gpu {

// scores (B) = lnf[b, p_b] . w; stats (3) += [pair losses, pairs ranked right, margins];
// dscores (B) = dloss * d(pair loss)/d(score) when not null.
void reward_fwd(float* scores, float* dscores, float* stats, const bf16* lnf, const bf16* w, const int32_t* targets,
                int B, int T, int C, float dloss, cudaStream_t stream);

// dlnf (B*T, C) = dscores[b] * w at row (b, p_b), 0 elsewhere; dw (C) += sum_b dscores[b] lnf[b, p_b].
void reward_bwd(bf16* dlnf, float* dw, const float* dscores, const bf16* lnf, const bf16* w, const int32_t* targets,
                int B, int T, int C, cudaStream_t stream);

}  // namespace trident::gpu
