// LayerNorm over the last dimension (forward and backward), fp32 statistics.
#pragma once

#include "common.cuh"
#include "trident/peer/peer_release.hpp"

namespace trident::gpu {

// out (N,C) = (in - mean) * rstd * w + b; mean, rstd (N) fp32.
void layernorm_fwd(bf16* out, float* mean, float* rstd, const bf16* in, const bf16* w, const bf16* b, int N, int C,
                   float eps, cudaStream_t stream);

// sum (N,C) = a + residual (may alias a), then out = LayerNorm(sum): the residual add fused.
// With a_peer (the other TP rank's partial of a): sum = bf16(a + a_peer) + residual; with
// `release` too, the kernel's last block then writes the other GPU's freed flag.
void add_layernorm_fwd(bf16* sum, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* a_peer,
                       const bf16* residual, const bf16* w, const bf16* b, int N, int C, float eps,
                       const PeerRelease& release, cudaStream_t stream);

// din_accum (N,C) += dL/din; dw, db (C) += (deterministic: partial column sums in scratch); with
// dsum, also dsum (C) += column sums of the updated din_accum (as stored, in bf16). With dout_peer
// (the other TP rank's partial of dout) the gradient is bf16(dout + dout_peer), and `release` as
// for add_layernorm_fwd (after the last kernel that reads dout_peer). din_keep, if not null (and
// not aliasing din_accum), gets din_accum as it was before the update: the fused kernel writes each
// row as it reads it, the separate kernels copy first.
void layernorm_bwd(bf16* din_accum, bf16* din_keep, float* dw, float* db, float* dsum, const bf16* dout,
                   const bf16* dout_peer, const bf16* in, const bf16* w, const float* mean, const float* rstd, int N,
                   int C, const PeerRelease& release, Scratch& scratch, cudaStream_t stream);

// din_keep (N,C) = din_accum (N,C), queued on stream; nothing for a null din_keep.
void keep_rows(bf16* din_keep, const bf16* din_accum, int N, int C, cudaStream_t stream);

// The RMSNorm backward (rmsnorm_bwd's contract, dout_peer and release included) in the fused
// LayerNorm backward's one pass, where that kernel exists for C (a multiple of 8 up to 2,048,
// whole 256-column groups up to 1,024); false, with nothing queued, elsewhere and for N = 0.
bool rmsnorm_bwd_fused(bf16* din_accum, bf16* din_keep, float* dw, const bf16* dout, const bf16* dout_peer,
                       const bf16* in, const bf16* w, const float* rstd, int N, int C, const PeerRelease& release,
                       Scratch& scratch, cudaStream_t stream);

}  // namespace trident::gpu
