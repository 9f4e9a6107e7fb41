// Elementwise ops: residual add, GELU (tanh approximation), fp32 scaling, dtype conversion.
#pragma once

#include "common.cuh"

namespace trident::gpu {

void add(bf16* out, const bf16* a, const bf16* b, size_t n, cudaStream_t stream);            // out = a + b
void gelu_fwd(bf16* out, const bf16* in, size_t n, cudaStream_t stream);                     // out = gelu(in)
void gelu_bwd(bf16* din, const bf16* dout, const bf16* pre, size_t n, cudaStream_t stream);  // din = dout*gelu'(pre)
void scale(float* x, float s, size_t n, cudaStream_t stream);                                // x *= s
void accumulate(float* acc, const float* x, size_t n, cudaStream_t stream);                  // acc += x
void convert(bf16* dst, const float* src, size_t n, cudaStream_t stream);                    // round to nearest even
void convert(float* dst, const bf16* src, size_t n, cudaStream_t stream);                    // exact

}  // namespace trident::gpu
