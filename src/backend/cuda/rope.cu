// RoPE kernel: a thread rotates kWidth elements of one head's first half against the same
// elements of its second half (16-byte accesses when HS / 2 % 8 == 0 and the tensors are aligned,
// else one element at a time); fp32 math, one rounding per output, in place.
#include "rope.cuh"

namespace trident::gpu {
namespace {

constexpr int kThreads = 256;

template <int kWidth>
__global__ void rope_kernel(bf16* qkv, const float* rope, const int32_t* doc_start, int T, int NH, int NKV, int HS,
                            int pos0, float sign, size_t items) {
  const int half = HS / 2, per_head = half / kWidth, rotated = NH + NKV;
  for (size_t idx = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; idx < items;
       idx += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(idx % per_head) * kWidth;
    const int h = static_cast<int>(idx / per_head % rotated);
    const size_t bt = idx / (static_cast<size_t>(per_head) * rotated);
    bf16* head = qkv + (bt * (NH + 2 * NKV) + h) * HS;
    const int pos = pos0 + static_cast<int>(bt % T) - (doc_start ? doc_start[bt] : 0);
    const float* cs = rope + static_cast<size_t>(pos) * HS;
    float x1[kWidth], x2[kWidth], c[kWidth], s[kWidth];
    load_vec(x1, head + d);
    load_vec(x2, head + half + d);
    load_vec(c, cs + d);
    load_vec(s, cs + half + d);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      const float sk = sign * s[k], a = x1[k], b = x2[k];
      x1[k] = a * c[k] - b * sk;
      x2[k] = b * c[k] + a * sk;
    }
    store_vec(head + d, x1);
    store_vec(head + half + d, x2);
  }
}

}  // namespace

void rope_rotate(bf16* qkv, const float* rope, const int32_t* doc_start, int B, int T, int NH, int NKV, int HS,
                 int pos0, float sign, cudaStream_t stream) {
  const int half = HS / 2;
  // Every head and table row then starts 16-byte aligned too (HS a multiple of 16).
  const bool vec = half % kVec == 0 && aligned16(qkv, rope);
  const int width = vec ? kVec : 1;
  const size_t items = static_cast<size_t>(B) * T * (NH + NKV) * (half / width);
  if (items == 0) return;
  const auto kernel = vec ? rope_kernel<kVec> : rope_kernel<1>;
  kernel<<<grid_for(items, kThreads, 65536), kThreads, 0, stream>>>(qkv, rope, doc_start, T, NH, NKV, HS, pos0, sign,
                                                                     items);
  CUDA_CHECK_LAUNCH("rope_kernel");
}

}  // namespace trident::gpu
