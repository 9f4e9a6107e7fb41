// Rotary position embedding (rotate_half convention) in place on the q and k heads of a fused
// qkv tensor, and its inverse for the gradients.
#pragma once

#include "common.cuh"

namespace trident::gpu {

// qkv (B, T, NH + 2 NKV, HS): heads [0, NH + NKV) of each position rotated by the angles of
// table rows pos0 + t of rope (T_table, HS) fp32 ([cos | sin] per row), pos0 + t - doc_start[b T + t]
// with doc_start (B,T) (packed sequences); sign -1 rotates back (the backward).
void rope_rotate(bf16* qkv, const float* rope, const int32_t* doc_start, int B, int T, int NH, int NKV, int HS,
                 int pos0, float sign, cudaStream_t stream);

}  // namespace trident::gpu
