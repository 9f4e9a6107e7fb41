// Sequence-level losses over the cross-entropy's token losses: per-sequence sums, per-row
// gradient weights and the DPO pair loss (see Backend::dpo_loss).
#pragma once

#include "common.cuh"
#include "trident/backend/backend.hpp"

namespace trident::gpu {

// out (S) = the sums of the S consecutive groups of len values of in (S*len).
void segment_sum(float* out, const float* in, int S, int len, cudaStream_t stream);
// x (rows, cols): row r *= w[r].
void scale_rows(bf16* x, const float* w, int rows, int cols, cudaStream_t stream);
// Backend::dpo_loss; row_weights may be null, targets too for the sigmoid loss. One block: the
// sums over pairs are added in an order fixed by the shape.
void dpo_loss(float* acc, float* row_weights, const float* policy_nll, const float* ref_nll, const int32_t* targets,
              int pairs, int T, const DpoArgs& a, cudaStream_t stream);

}  // namespace trident::gpu
