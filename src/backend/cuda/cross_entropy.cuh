// Vocab-parallel cross-entropy over a shard of logits (N, v_local); the first v_valid columns
// are real vocabulary. The caller reduces rowmax (max) and stats (sum) over TP in between.
#pragma once

#include "common.cuh"

namespace trident::gpu {

// rowmax (N) = max over valid columns (-inf when v_valid == 0).
void xent_max(float* rowmax, const bf16* logits, int N, int v_local, int v_valid, cudaStream_t stream);

// stats (N,2) = [sum exp(logit - rowmax), logit of the target if local else 0].
void xent_stats(float* stats, const bf16* logits, const float* rowmax, const int32_t* targets, int N, int v_local,
                int v_valid, int vocab_start, cudaStream_t stream);

// sums (N,2) = [sum exp(logit - rowmax), sum exp(logit - rowmax) (logit - rowmax)] over valid columns.
void xent_entropy_sums(float* sums, const bf16* logits, const float* rowmax, int N, int v_local, int v_valid,
                       cudaStream_t stream);

// losses (N) = log(stats0) + rowmax - stats1 (when not null); logits are overwritten with
// dloss * (softmax - onehot(target)), 0 in padding columns.
void xent_bwd(float* losses, bf16* logits, const float* rowmax, const float* stats, const int32_t* targets, int N,
              int v_local, int v_valid, int vocab_start, float dloss, cudaStream_t stream);

// The three above in one kernel for an unsharded vocabulary (vocab_start 0): each row is read
// twice (max and sum in one online pass, then the gradient pass, mostly from L2) and written once.
void xent_fused(float* losses, bf16* logits, const int32_t* targets, int N, int v_local, int v_valid, float dloss,
                cudaStream_t stream);

}  // namespace trident::gpu
