// CpuBackend sample_shard: per row of a vocab-parallel logits shard, the softmax statistics and the
// best Gumbel-perturbed score (the sampled token of this shard), which the model combines over TP.
#include <cmath>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"
#include "trident/core/rng.hpp"

namespace trident {

void CpuBackend::sample_shard(TensorView stats, TensorView logits, const int32_t* keys, uint64_t seed,
                              float temperature, int N, int v_local, int v_valid, int vocab_start) {
  TRIDENT_CHECK(v_valid >= 0 && v_valid <= v_local, str("sample_shard: v_valid ", v_valid, " outside [0, ", v_local, "]"));
  TRIDENT_CHECK(keys != nullptr || N == 0, "sample_shard: keys not given");
  const size_t NV = static_cast<size_t>(N) * v_local;
  float* st = cpu::f32_data(stats, static_cast<size_t>(N) * kSampleStats, "sample_shard: stats");   // (N, 5)
  const float* z = cpu::f32_data(logits, NV, "sample_shard: logits");                             // (N, v_local)
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NV))
  for (int n = 0; n < N; ++n) {
    const float* row = z + static_cast<size_t>(n) * v_local;
    float mx = -INFINITY, best = -INFINITY, best_logit = 0;
    int best_id = -1;
    for (int j = 0; j < v_valid; ++j) {
      mx = std::max(mx, row[j]);
      const float score = temperature > 0 ? row[j] / temperature + gumbel_at(seed, keys[2 * n], keys[2 * n + 1],
                                                                              vocab_start + j)
                                          : row[j];
      if (score > best) {   // strictly: ties keep the lowest id
        best = score;
        best_id = vocab_start + j;
        best_logit = row[j];
      }
    }
    double s = 0;
    for (int j = 0; j < v_valid; ++j) s += std::exp(row[j] - mx);
    float* out = st + static_cast<size_t>(n) * kSampleStats;
    out[0] = mx;
    out[1] = static_cast<float>(s);
    out[2] = best;
    out[3] = static_cast<float>(best_id);
    out[4] = best_logit;
  }
}

}  // namespace trident
