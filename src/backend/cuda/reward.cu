// Reward head kernels. The head reads one row per sequence, a few of a micro-batch's B*T rows:
// one block does all of it, sequence after sequence, and sums in a fixed order (deterministic).
#include "reward.cuh"

namespace trident::gpu {
namespace {

constexpr int kThreads = 512;

// The scored position of sequence b, on every thread of the block: the token after the last
// trained target, kept inside the T inputs; -1 when no target is trained.
__device__ int scored_position(const int32_t* targets, int T, float* shared) {
  float last = -1.0f;   // positions below 2^24 are exact as floats
  for (int t = threadIdx.x; t < T; t += blockDim.x)
    if (targets[t] >= 0) last = fmaxf(last, static_cast<float>(t));
  const int t = static_cast<int>(block_max(last, shared));
  return t < 0 ? -1 : min(t + 1, T - 1);
}

// Dynamic shared memory: B ints (each sequence's position).
__global__ void reward_fwd_kernel(float* scores, float* dscores, float* stats, const bf16* lnf, const bf16* w,
                                  const int32_t* targets, int B, int T, int C, float dloss) {
  __shared__ float shared[32];
  extern __shared__ int pos[];
  for (int b = 0; b < B; ++b) {
    const int p = scored_position(targets + static_cast<size_t>(b) * T, T, shared);
    float acc = 0.0f;
    if (p >= 0) {
      const bf16* row = lnf + (static_cast<size_t>(b) * T + p) * C;
      for (int c = threadIdx.x; c < C; c += blockDim.x) acc += to_float(row[c]) * to_float(w[c]);
    }
    acc = block_sum(acc, shared);
    if (threadIdx.x == 0) {
      pos[b] = p;
      scores[b] = p < 0 ? 0.0f : acc;
    }
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  // Pairs in order on one thread: B / 2 of them.
  float loss = 0.0f, correct = 0.0f, margin = 0.0f;
  for (int i = 0; i < B / 2; ++i) {
    const int c = 2 * i, r = 2 * i + 1;
    const bool scored = pos[c] >= 0 && pos[r] >= 0;
    if (dscores) dscores[c] = dscores[r] = 0.0f;
    if (!scored) continue;
    const float d = scores[c] - scores[r];
    loss += d > 0 ? log1pf(expf(-d)) : -d + log1pf(expf(d));   // -log sigmoid(d), finite for any d
    correct += d > 0 ? 1.0f : 0.0f;
    margin += d;
    if (!dscores) continue;
    const float g = -1.0f / (1.0f + expf(d));   // d(-log sigmoid(d))/dd
    dscores[c] = dloss * g;
    dscores[r] = -dloss * g;
  }
  stats[0] += loss;
  stats[1] += correct;
  stats[2] += margin;
}

// Each thread owns columns c of dw and of the scored rows, and adds the sequences in order.
__global__ void reward_bwd_kernel(bf16* dlnf, float* dw, const float* dscores, const bf16* lnf, const bf16* w,
                                  const int32_t* targets, int B, int T, int C) {
  __shared__ float shared[32];
  for (int b = 0; b < B; ++b) {
    const int p = scored_position(targets + static_cast<size_t>(b) * T, T, shared);
    if (p < 0) continue;
    const size_t row = (static_cast<size_t>(b) * T + p) * C;
    const float ds = dscores[b];
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      dlnf[row + c] = to_bf16(ds * to_float(w[c]));
      dw[c] += ds * to_float(lnf[row + c]);
    }
  }
}

}  // namespace

void reward_fwd(float* scores, float* dscores, float* stats, const bf16* lnf, const bf16* w, const int32_t* targets,
                int B, int T, int C, float dloss, cudaStream_t stream) {
  if (B == 0) return;
  reward_fwd_kernel<<<1, kThreads, B * sizeof(int), stream>>>(scores, dscores, stats, lnf, w, targets, B, T, C,
                                                                dloss);
  CUDA_CHECK_LAUNCH("reward_fwd_kernel");
}

void reward_bwd(bf16* dlnf, float* dw, const float* dscores, const bf16* lnf, const bf16* w, const int32_t* targets,
                int B, int T, int C, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(dlnf, 0, static_cast<size_t>(B) * T * C * sizeof(bf16), stream));
  if (B == 0) return;
  reward_bwd_kernel<<<1, kThreads, 0, stream>>>(dlnf, dw, dscores, lnf, w, targets, B, T, C);
  CUDA_CHECK_LAUNCH("reward_bwd_kernel");
}

}  // namespace trident::gpu
