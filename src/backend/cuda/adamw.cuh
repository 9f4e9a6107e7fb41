// Fused AdamW step over a flat parameter range (PyTorch semantics, decoupled weight decay).
#pragma once

#include "common.cuh"
#include "trident/backend/backend.hpp"

namespace trident::gpu {

// master, m, v, grad (n) fp32; param (n) bf16 = master rounded to nearest, when not null.
void adamw(bf16* param, float* master, float* m, float* v, const float* grad, size_t n, const AdamWArgs& a,
           cudaStream_t stream);

// AdamW over `count` pieces (device table), one block per piece: see Backend::adamw_multi.
// norm_sq may be null (no clipping).
void adamw_multi(bf16* param, float* master, float* m, float* v, const float* grad, const MultiTensorEntry* pieces,
                 int count, const AdamWArgs& a, const float* norm_sq, float clip, cudaStream_t stream);

}  // namespace trident::gpu
