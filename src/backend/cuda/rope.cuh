// Rotary position embedding (rotate_half convention) in place on the q and k heads of a fused
// qkv tensor, and its inverse for the gradients; the pair rotation the attention kernels' fused
// RoPE shares with it.
#pragma once

#include "common.cuh"

namespace trident::gpu {

// Rotates the pair (x1, x2) = (element d, element d + HS/2) of a head by the angle whose cosine
// and sine are c and s (-s rotates back). Written with explicit fused multiply-adds so that the
// standalone kernel and the attention kernels' fused RoPE round every product the same way.
__device__ __forceinline__ void rope_rotate_pair(float& x1, float& x2, float c, float s) {
  const float a = x1, b = x2;
  x1 = fmaf(a, c, -__fmul_rn(b, s));
  x2 = fmaf(b, c, __fmul_rn(a, s));
}

// qkv (B, T, NH + 2 NKV, HS): heads [0, NH + NKV) of each position rotated by the angles of
// table rows pos0 + t of rope (T_table, HS) fp32 ([cos | sin] per row); sign -1 rotates back
// (the backward).
void rope_rotate(bf16* qkv, const float* rope, int B, int T, int NH, int NKV, int HS, int pos0, float sign,
                 cudaStream_t stream);

}  // namespace trident::gpu
