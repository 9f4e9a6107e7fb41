// Token + position embedding over a vocab-parallel shard of wte (forward and backward).
#pragma once

#include "common.cuh"

namespace trident::gpu {

// out (B,T,C) = wte[tok - vocab_start] if local else 0, + wpe[t] when wpe is not null.
void encoder_fwd(bf16* out, const int32_t* tokens, const bf16* wte, const bf16* wpe, int B, int T, int C,
                 int vocab_start, int v_local, cudaStream_t stream);

// dwte (v_local,C) += rows of dout at local tokens; dwpe (T,C) += sum over B when not null.
// Deterministic: each dwte row is summed by one block, in position order.
void encoder_bwd(float* dwte, float* dwpe, const bf16* dout, const int32_t* tokens, int B, int T, int C,
                 int vocab_start, int v_local, Scratch& scratch, cudaStream_t stream);

}  // namespace trident::gpu
