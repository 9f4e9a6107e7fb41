// SwiGLU over the fused gate/up projection (Llama's MLP activation), forward and backward.
#pragma once

#include "common.cuh"

namespace trident::gpu {

// in (N, 2F) holds rows [gate (F) | up (F)]; out (N,F) = silu(gate) * up.
void swiglu_fwd(bf16* out, const bf16* in, int N, int F, cudaStream_t stream);
// din (N, 2F) = [dgate | dup] from dout (N,F) and the forward's in; din may alias in.
void swiglu_bwd(bf16* din, const bf16* dout, const bf16* in, int N, int F, cudaStream_t stream);

}  // namespace trident::gpu
