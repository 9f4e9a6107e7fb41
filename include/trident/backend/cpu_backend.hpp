// CpuBackend: fp32 reference implementation of every op; deterministic (threads split outputs,
// never reductions), so the same inputs give the same bits whatever the thread count.
#pragma once

#include "trident/backend/backend.hpp"

namespace trident {

std::unique_ptr<Backend> make_cpu_backend();

// Grouped-query causal attention in fp32 host memory: qkv (B, T, NH + 2 NKV, HS) (NH query
// heads, then NKV key heads, then NKV value heads per position; NKV divides NH), query head h
// attends with key/value head h / (NH / NKV); out (B, T, NH, HS), lse (B, NH, T) as
// Backend::attention_fwd (which is the case NKV = NH). The backward writes dqkv (same layout),
// the key/value gradients summed over each group's query heads. These join the Backend interface
// together with the CUDA flash-attention kernels for grouped-query attention (issue 24).
void cpu_gqa_attention_fwd(TensorView out, TensorView lse, TensorView qkv, int B, int T, int NH, int NKV, int HS);
void cpu_gqa_attention_bwd(TensorView dqkv, TensorView dout, TensorView qkv, TensorView out, TensorView lse, int B,
                           int T, int NH, int NKV, int HS);

}  // namespace trident
