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

// The dK/dV kernel runs one block per (sequence, key/value head, 64-key block), which streams the
// queries of every query head of the group. Where those blocks are too few to fill the GPU (a
// small batch of few key/value heads: Llama shapes under tensor parallelism at micro-batch 1),
// the group's query heads are split into `parts` equal parts, a block each, whose fp32 sums
// `partials` (attention_dkv_partial_floats) holds until the last block of a key block adds them
// up in part order; `arrivals` counts the blocks of each key block (attention_dkv_key_blocks
// words, zeroed by the launch). A given part count gives the same bits on every run; the sum's order,
// and so its last bits, depends on it.
struct DkvParts {
  int parts = 1;
  float* partials = nullptr;
  unsigned* arrivals = nullptr;
};
// The parts for a shape: 1 where one block per group already gives 2 blocks per multiprocessor,
// else the fewest that give 4, at most the group.
int attention_dkv_parts(int B, int T, int NH, int NKV);
size_t attention_dkv_partial_floats(int B, int T, int NKV, int HS, int parts);
// Tests: at most this many parts (the largest divisor of the group up to it), 0 = by shape.
void set_attention_dkv_parts(int at_most);

// As attention_bwd, given delta (B,NH,T) = rowsum(dout * out). With bias_partials, also writes
// the column sums of dqkv per (b, 64-row block): (B ceil(T / 64), (NH + 2 NKV) HS) floats. With
// rope (a rope_table; not with bias_partials) dq and dk are stored rotated back (rope_bwd fused).
void attention_bwd_mma(bf16* dqkv, float* bias_partials, const bf16* dout, const bf16* qkv, const float* lse,
                       const float* delta, const int32_t* doc_start, const float* rope, int B, int T, int NH, int NKV,
                       int HS, const DkvParts& split, cudaStream_t stream);

// Rows of a block of the tensor-core kernels (and of each bias_partials chunk).
constexpr int kAttentionBlockRows = 64;

// Key blocks of the dK/dV kernel over every sequence and key/value head, B NKV ceil(T / 64): the
// words DkvParts::arrivals counts, each with `parts` blocks.
inline size_t attention_dkv_key_blocks(int B, int T, int NKV) {
  return static_cast<size_t>(B) * NKV * ceil_div(T, kAttentionBlockRows);
}

}  // namespace trident::gpu
