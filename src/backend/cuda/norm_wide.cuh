// LayerNorm and RMSNorm on wide rows (C a multiple of 8 from 2,056 to 8,192: Llama-3-8B's 4,096,
// a 6.7B GPT's 4,096, the 16B Llama's 6,144): a block per row in the forward and per chunk of rows
// in the backward, each thread holding its pieces of the row in registers. The warp-per-row
// kernels have too little of such a row in flight, and the fused backward's shared-memory rows
// (16 KiB per 256 columns) outgrow a block.
#pragma once

#include "common.cuh"
#include "trident/peer/peer_release.hpp"

namespace trident::gpu {

// The forward: LayerNorm where mean and b are given, RMSNorm where both are null; with `sum`, the
// residual add first (add_layernorm_fwd's and add_rmsnorm_fwd's contract, peer and release
// included). False, with nothing queued, where C or the addresses do not suit (N > 0 assumed).
bool norm_fwd_wide(bf16* out, float* mean, float* rstd, const bf16* in, const bf16* peer, const bf16* residual,
                   bf16* sum, const bf16* w, const bf16* b, int N, int C, float eps, const PeerRelease& release,
                   cudaStream_t stream);

// The backward: layernorm_bwd's contract where mean and db are given, rmsnorm_bwd's where mean, db
// and dsum are null. False, with nothing queued, where C, the addresses or the GPU's shared
// memory do not suit (N > 0 assumed).
bool norm_bwd_wide(bf16* din_accum, bf16* din_keep, float* dw, float* db, float* dsum, const bf16* dout,
                   const bf16* dout_peer, const bf16* in, const bf16* w, const float* mean, const float* rstd, int N,
                   int C, const PeerRelease& release, Scratch& scratch, cudaStream_t stream);

}  // namespace trident::gpu
