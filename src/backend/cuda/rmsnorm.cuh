// RMSNorm over the last dimension (Llama; forward with an optional fused residual add, and
// backward), fp32 statistics.
#pragma once

#include "common.cuh"
#include "trident/peer/peer_release.hpp"

namespace trident::gpu {

// out (N,C) = in * rstd * w, rstd (N) fp32 = 1 / sqrt(mean(in^2) + eps).
void rmsnorm_fwd(bf16* out, float* rstd, const bf16* in, const bf16* w, int N, int C, float eps, cudaStream_t stream);

// sum (N,C) = a + residual (may alias a), then out = RMSNorm(sum), in one pass over the rows. With
// a_peer (the other TP rank's partial of a): sum = bf16(a + a_peer) + residual; with `release`
// too, the kernel's last block then writes the other GPU's freed flag (as add_layernorm_fwd's).
void add_rmsnorm_fwd(bf16* sum, bf16* out, float* rstd, const bf16* a, const bf16* a_peer, const bf16* residual,
                     const bf16* w, int N, int C, float eps, const PeerRelease& release, cudaStream_t stream);

// din_accum (N,C) += dL/din; dw (C) += (deterministic: partial column sums in scratch). With
// dout_peer (the other TP rank's partial of dout) the gradient is bf16(dout + dout_peer), and
// `release` as for add_rmsnorm_fwd (after the last kernel that reads dout_peer); din_keep as for
// layernorm_bwd.
void rmsnorm_bwd(bf16* din_accum, bf16* din_keep, float* dw, const bf16* dout, const bf16* dout_peer, const bf16* in,
                 const bf16* w, const float* rstd, int N, int C, const PeerRelease& release, Scratch& scratch,
                 cudaStream_t stream);

}  // namespace trident::gpu
