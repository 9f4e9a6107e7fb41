// Fused AdamW step over a flat parameter range (PyTorch semantics, decoupled weight decay).
#pragma once

#include "common.cuh"
#include "trident/backend/backend.hpp"

namespace trident::gpu {

// master, m, v, grad (n) fp32; param (n) bf16 = master rounded to nearest, when not null.
void adamw(bf16* param, float* master, float* m, float* v, const float* grad, size_t n, const AdamWArgs& a,
           cudaStream_t stream);

}  // namespace trident::gpu
