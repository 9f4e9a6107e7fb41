// Causal multi-head self-attention, flash style: softmax statistics online, score tiles only
// in shared memory, no (T, T) matrix in global memory.
#pragma once

#include "common.cuh"

namespace trident::gpu {

// Largest head size the kernels hold in registers (4 dimensions per lane of a warp).
constexpr int kMaxHeadSize = 128;

// out (B,T,NH,HS) = softmax(q k^T / sqrt(HS), causal) v from qkv (B,T,3,NH,HS);
// lse (B,NH,T) = logsumexp of each scaled score row.
void attention_fwd(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, int HS, cudaStream_t stream);

// dqkv (B,T,3,NH,HS) from dout (B,T,NH,HS), recomputing probabilities from lse.
// Deterministic: every output element is summed by one thread in a fixed order.
void attention_bwd(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse, int B, int T,
                   int NH, int HS, Scratch& scratch, cudaStream_t stream);

}  // namespace trident::gpu
