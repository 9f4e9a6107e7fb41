// Causal multi-head self-attention, flash style: softmax statistics online, score tiles only
// in registers or shared memory, no (T, T) matrix in global memory; and KV-cache decoding.
#pragma once

#include "common.cuh"

namespace trident::gpu {

// Largest head size the kernels support (the generic path holds 4 dimensions per lane).
constexpr int kMaxHeadSize = 128;

// out (B,T,NH,HS) = softmax(q k^T / sqrt(HS), causal) v from qkv (B,T,3,NH,HS);
// lse (B,NH,T) = logsumexp of each scaled score row.
void attention_fwd(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, int HS, cudaStream_t stream);

// dqkv (B,T,3,NH,HS) from dout (B,T,NH,HS), recomputing probabilities from lse; with dbias,
// also dbias (3 NH HS) += column sums of dqkv over the B T rows (the qkv bias gradient).
// Deterministic: every output element is summed by one thread in a fixed order.
void attention_bwd(bf16* dqkv, float* dbias, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse,
                   int B, int T, int NH, int HS, Scratch& scratch, cudaStream_t stream);

// Stores the keys and values of the Tn new positions [past, past + Tn) of qkv (B,Tn,3,NH,HS)
// into k_cache, v_cache (B,NH,Tmax,HS); out (B,Tn,NH,HS) = causal attention of each new query
// over cache positions [0, its own position].
void attention_decode(bf16* out, bf16* k_cache, bf16* v_cache, const bf16* qkv, int B, int Tn, int past, int Tmax,
                      int NH, int HS, cudaStream_t stream);

// q, k or v (slot 0, 1, 2) of head h of sequence b in qkv (B,T,3,NH,HS); rows t are
// 3 * NH * HS elements apart.
__host__ __device__ __forceinline__ size_t qkv_offset(int b, int h, int slot, int T, int NH, int HS) {
  return (static_cast<size_t>(b) * T * 3 + slot) * NH * HS + static_cast<size_t>(h) * HS;
}

// Head h of sequence b in a (B,T,NH,HS) tensor; rows t are NH * HS elements apart.
__host__ __device__ __forceinline__ size_t head_offset(int b, int h, int T, int NH, int HS) {
  return static_cast<size_t>(b) * T * NH * HS + static_cast<size_t>(h) * HS;
}

}  // namespace trident::gpu
