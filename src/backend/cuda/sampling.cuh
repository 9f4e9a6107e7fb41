// Sampling from a vocab-parallel shard of logits: softmax statistics and the best Gumbel-perturbed
// score per row, combined over the TP shards by the model.
#pragma once

#include "common.cuh"

namespace trident::gpu {

// stats (N,5) = [max logit, sum exp(logit - max), best score, its id, its logit] of each row of
// logits (N, v_local) over its first v_valid columns (ids vocab_start + j); row i is sequence
// keys[2i] at position keys[2i + 1]; score = logit / temperature + gumbel_at(...), or the logit
// at temperature 0. Ties go to the lowest id.
void sample_shard(float* stats, const bf16* logits, const int32_t* keys, uint64_t seed, float temperature, int N,
                  int v_local, int v_valid, int vocab_start, cudaStream_t stream);

}  // namespace trident::gpu
