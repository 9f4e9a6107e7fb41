// Causal multi-head self-attention, flash style: softmax statistics online, score tiles only
// in registers or shared memory, no (T, T) matrix in global memory; and KV-cache decoding.
#pragma once

#include "common.cuh"

namespace trident::gpu {

// Largest head size the kernels support (the generic path holds 4 dimensions per lane).
constexpr int kMaxHeadSize = 128;

// Grouped-query attention: qkv rows hold NH query heads, then NKV key heads, then NKV value heads
// (GPT-2's (B,T,3,NH,HS) is NKV = NH); NKV divides NH and query head h reads key/value head
// h / (NH / NKV). The kernels index that head; nothing copies it per query head.

// out (B,T,NH,HS) = softmax(q k^T / sqrt(HS), causal) v from qkv (B,T,NH+2NKV,HS);
// lse (B,NH,T) = logsumexp of each scaled score row. doc_start (B,T), or null: packed sequences
// (backend.hpp); key blocks outside a query block's documents are skipped, not only masked.
void attention_fwd(bf16* out, float* lse, const bf16* qkv, const int32_t* doc_start, int B, int T, int NH, int NKV,
                   int HS, cudaStream_t stream);

// dqkv (B,T,NH+2NKV,HS) from dout (B,T,NH,HS), recomputing probabilities from lse, the key and
// value gradients summed over each group's query heads; with dbias, also dbias ((NH+2NKV) HS) +=
// column sums of dqkv over the B T rows (the qkv bias gradient). Deterministic: every output
// element is summed by one thread in a fixed order. With rope (a rope_table; not with dbias) the
// q and k gradients leave rotated back as rope_rotate(sign -1) would leave them: the tensor-core
// kernels rotate them before their one rounding, the generic ones call it after.
void attention_bwd(bf16* dqkv, float* dbias, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse,
                   const int32_t* doc_start, const float* rope, int B, int T, int NH, int NKV, int HS,
                   Scratch& scratch, cudaStream_t stream);

// Stores the keys and values of the N new tokens of qkv (N,NH+2NKV,HS), token i at slot rows[2i] and
// position rows[2i + 1] (rows (N,2) on the device), into k_cache, v_cache (S,NKV,Tmax,HS); then
// out (N,NH,HS) = causal attention of each token's query over its slot's positions [0, its own].
void attention_decode(bf16* out, bf16* k_cache, bf16* v_cache, const bf16* qkv, const int32_t* rows, int N, int S,
                      int Tmax, int NH, int NKV, int HS, cudaStream_t stream);

// Elements between rows t and t + 1 of qkv.
__host__ __device__ __forceinline__ size_t qkv_row_stride(int NH, int NKV, int HS) {
  return static_cast<size_t>(NH + 2 * NKV) * HS;
}

// Query head h (slot 0), or key or value head h (slot 1, 2), of sequence b in qkv (B,T,NH+2NKV,HS).
__host__ __device__ __forceinline__ size_t qkv_offset(int b, int h, int slot, int T, int NH, int NKV, int HS) {
  const int head = slot == 0 ? h : NH + (slot - 1) * NKV + h;
  return static_cast<size_t>(b) * T * qkv_row_stride(NH, NKV, HS) + static_cast<size_t>(head) * HS;
}

// Head h of sequence b in a (B,T,NH,HS) tensor; rows t are NH * HS elements apart.
__host__ __device__ __forceinline__ size_t head_offset(int b, int h, int T, int NH, int HS) {
  return static_cast<size_t>(b) * T * NH * HS + static_cast<size_t>(h) * HS;
}

}  // namespace trident::gpu
