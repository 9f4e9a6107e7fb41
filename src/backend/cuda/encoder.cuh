// Token + position embedding over a vocab-parallel shard of wte (forward and backward).
#pragma once

#include "common.cuh"

namespace trident::gpu {

// out (B,T,C) = wte[tok - vocab_start] if local else 0, + wpe[p] when wpe is not null: p = t, or
// t - doc_start[b T + t] with doc_start (B,T) (packed sequences).
void encoder_fwd(bf16* out, const int32_t* tokens, const bf16* wte, const bf16* wpe, const int32_t* doc_start, int B,
                 int T, int C, int vocab_start, int v_local, cudaStream_t stream);

// dwte (v_local,C) += rows of dout at local tokens; dwpe (T,C) += the rows of each position p when
// not null. Deterministic: each dwte (packed: dwpe) row is summed by one block, in row order.
void encoder_bwd(float* dwte, float* dwpe, const bf16* dout, const int32_t* tokens, const int32_t* doc_start, int B,
                 int T, int C, int vocab_start, int v_local, Scratch& scratch, cudaStream_t stream);

}  // namespace trident::gpu
