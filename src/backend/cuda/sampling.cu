// sample_shard: one block per row; each thread keeps its columns' maximum, exponential sum and best
// score, merged in a fixed order so that a draw does not depend on timing.
#include "sampling.cuh"
#include "trident/core/rng.hpp"

namespace trident::gpu {
namespace {

constexpr int kThreads = 256;

// The better of two candidates: higher score, ties to the lower id (an id of -1 is no candidate).
__device__ __forceinline__ bool better(float score, int id, float other_score, int other_id) {
  if (other_id < 0) return id >= 0;
  if (id < 0) return false;
  return score > other_score || (score == other_score && id < other_id);
}

__global__ void __launch_bounds__(kThreads) sample_shard_kernel(float* stats, const bf16* logits, const int32_t* keys,
                                                                uint64_t seed, float temperature, int v_local,
                                                                int v_valid, int vocab_start) {
  __shared__ float shared[32];
  __shared__ float best_s[kThreads], logit_s[kThreads];
  __shared__ int id_s[kThreads];
  const int row = blockIdx.x;
  const bf16* x = logits + static_cast<size_t>(row) * v_local;
  const uint64_t sequence = static_cast<uint64_t>(keys[2 * row]), position = static_cast<uint64_t>(keys[2 * row + 1]);
  float m = -INFINITY, best = -INFINITY, best_logit = 0.0f;
  int best_id = -1;
  for (int j = threadIdx.x; j < v_valid; j += blockDim.x) {   // increasing j: a tie keeps the lower id
    const float z = to_float(x[j]);
    m = fmaxf(m, z);
    const float score = temperature > 0.0f ? z / temperature + gumbel_at(seed, sequence, position, vocab_start + j) : z;
    if (best_id < 0 || score > best) {
      best = score;
      best_id = vocab_start + j;
      best_logit = z;
    }
  }
  m = block_max(m, shared);
  float s = 0.0f;
  for (int j = threadIdx.x; j < v_valid; j += blockDim.x) s += expf(to_float(x[j]) - m);
  s = block_sum(s, shared);
  best_s[threadIdx.x] = best;
  id_s[threadIdx.x] = best_id;
  logit_s[threadIdx.x] = best_logit;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int t = 1; t < blockDim.x; ++t)
    if (better(best_s[t], id_s[t], best, best_id)) {
      best = best_s[t];
      best_id = id_s[t];
      best_logit = logit_s[t];
    }
  float* out = stats + static_cast<size_t>(row) * 5;
  out[0] = m;
  out[1] = s;
  out[2] = best_id >= 0 ? best : -INFINITY;
  out[3] = static_cast<float>(best_id);
  out[4] = best_logit;
}

}  // namespace

void sample_shard(float* stats, const bf16* logits, const int32_t* keys, uint64_t seed, float temperature, int N,
                  int v_local, int v_valid, int vocab_start, cudaStream_t stream) {
  if (N == 0) return;
  sample_shard_kernel<<<N, kThreads, 0, stream>>>(stats, logits, keys, seed, temperature, v_local, v_valid,
                                                  vocab_start);
  CUDA_CHECK_LAUNCH("sample_shard_kernel");
}

}  // namespace trident::gpu
