// The warp-specialized attention forward for Hopper (TMA, mbarriers, register reallocation);
// attention_mma.cu dispatches to it at head size 64 where the wgmma engine runs.
#pragma once

#include "common.cuh"

namespace trident::gpu {

// Whether this build's kernel can run: it starts with the registers its warpgroups' setmaxnreg
// counts need (found once, on the first call; sm_90a devices only).
bool attention_fwd_tma_supported();

// As attention_fwd at HS = 64, scores scaled by `scale`; sm_90a only, tensors 16-byte aligned.
void attention_fwd_tma(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, int NKV, float scale,
                       cudaStream_t stream);

}  // namespace trident::gpu
