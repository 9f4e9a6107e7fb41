// Tensor-core causal attention for head sizes 64 and 128 (bf16 mma.sync, sm_80+); attention.cu
// dispatches to it when the shapes and addresses allow and keeps the generic kernels otherwise.
#pragma once

#include <initializer_list>

#include "common.cuh"
#include "trident/backend/cuda_backend.hpp"

namespace trident::gpu {

// Picks the engine the tensor-core kernels use from `kernels` and what the device can run (wgmma
// or mma.sync: one small launch, an allocation and a copy, once per process) and whether the
// warp-specialized forward runs, so that the first attention call does not. Holds for the process.
void choose_attention_engine(AttentionKernels kernels);

// True for HS 64 and 128 when every tensor starts on a 16-byte boundary (the kernels copy rows
// in 16-byte pieces).
bool attention_mma_supported(int HS, std::initializer_list<const void*> tensors);

// As attention_fwd.
void attention_fwd_mma(bf16* out, float* lse, const bf16* qkv, const int32_t* doc_start, int B, int T, int NH,
                       int NKV, int HS, cudaStream_t stream);

// As attention_bwd, given delta (B,NH,T) = rowsum(dout * out). With bias_partials, also writes
// the column sums of dqkv per (b, 64-row block): (B ceil(T / 64), (NH + 2 NKV) HS) floats. With
// rope (a rope_table; not with bias_partials) dq and dk are stored rotated back (rope_bwd fused).
void attention_bwd_mma(bf16* dqkv, float* bias_partials, const bf16* dout, const bf16* qkv, const float* lse,
                       const float* delta, const int32_t* doc_start, const float* rope, int B, int T, int NH, int NKV,
                       int HS, cudaStream_t stream);

// Rows of a block of the tensor-core kernels (and of each bias_partials chunk).
constexpr int kAttentionBlockRows = 64;

}  // namespace trident::gpu
