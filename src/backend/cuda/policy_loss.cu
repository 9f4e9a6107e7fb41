// Online RL's per-token policy loss: one block strides over a micro-batch's token positions, so
// that the loss sums come out in the same order on every run.
#include "policy_loss.cuh"

namespace trident::gpu {
namespace {

constexpr int kThreads = 1024;

__global__ void policy_loss_kernel(float* acc, float* weights, const float* nll, const float* old_logp,
                                   const float* coef, const float* coef_adv, const float* ref_nll,
                                   const float* entropy_sums, int N, PolicyArgs a) {
  __shared__ float shared[32];
  float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int t = threadIdx.x; t < N; t += blockDim.x) {
    const float c = coef[t];
    if (c == 0.0f) {
      if (weights) weights[t] = 0.0f;
      continue;
    }
    // coef >= 0 scales both branches of the minimum alike (see CpuBackend::policy_loss).
    const float rho = expf(-nll[t] - old_logp[t]);
    const float unclipped = rho * coef_adv[t];
    const float clipped = fminf(fmaxf(rho, 1.0f - a.clip_eps), 1.0f + a.clip_eps) * coef_adv[t];
    const bool is_clipped = clipped < unclipped;
    float loss = -fminf(unclipped, clipped), dnll = is_clipped ? 0.0f : unclipped;
    if (ref_nll) {
      const float d = nll[t] - ref_nll[t], e = expf(d);
      loss += a.kl_beta * c * (e - d - 1.0f);
      dnll += a.kl_beta * c * (e - 1.0f);
      sums[2] += e - d - 1.0f;
    }
    sums[0] += loss;
    sums[1] += is_clipped ? 1.0f : 0.0f;
    if (entropy_sums) sums[3] += logf(entropy_sums[2 * t]) - entropy_sums[2 * t + 1] / entropy_sums[2 * t];
    if (weights) weights[t] = a.scale * dnll;
  }
  for (int k = 0; k < 4; ++k) {
    const float total = block_sum(sums[k], shared);
    if (threadIdx.x == 0) acc[k] += total;
  }
}

}  // namespace

void policy_loss(float* acc, float* weights, const float* nll, const float* old_logp, const float* coef,
                 const float* coef_adv, const float* ref_nll, const float* entropy_sums, int N, const PolicyArgs& a,
                 cudaStream_t stream) {
  policy_loss_kernel<<<1, kThreads, 0, stream>>>(acc, weights, nll, old_logp, coef, coef_adv, ref_nll, entropy_sums,
                                                 N, a);
  CUDA_CHECK_LAUNCH("policy_loss_kernel");
}

}  // namespace trident::gpu
