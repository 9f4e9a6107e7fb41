// One period of the blend is laid out by Tijdeman's chairman-assignment rule (1980): among the
// datasets at least 1/(2D-2) behind their share, take the one whose lag would first reach
// 1 - 1/(2D-2) (earliest deadline first). Every dataset's count among the first n samples then
// stays within 1 - 1/(2D-2) of w_d * n for every n; Megatron's simpler "most behind first" rule
// can drift by more than one sample. Within 1 at n = period means each dataset has exactly its
// share there, so the period repeats unchanged.
#include "trident/io/blend_schedule.hpp"

#include "trident/config/blend_spec.hpp"
#include "trident/core/error.hpp"

namespace trident {

BlendSchedule::BlendSchedule(const std::vector<uint64_t>& weights) : weights_(weights) {
  uint64_t period = 0;
  for (uint64_t w : weights) {
    TRIDENT_CHECK(w > 0, "blend weight 0");
    period += w;
  }
  TRIDENT_CHECK(period > 0 && period <= kMaxBlendPeriod, str("blend period ", period));
  const size_t n_sets = weights.size();
  // Scaled by period * K so that every quantity is an integer; with period <= 2^20 and K <= 2^21
  // the products below stay under 2^62.
  const uint64_t K = n_sets > 1 ? 2 * n_sets - 2 : 1;
  std::vector<uint64_t> count(n_sets, 0);
  dataset_.resize(period);
  rank_.resize(period);
  for (uint64_t n = 1; n <= period; ++n) {
    size_t best = n_sets;
    for (size_t d = 0; d < n_sets; ++d) {
      // Behind by at least 1/K: w_d * n - count_d >= 1/K (the theorem guarantees someone is).
      const int64_t lag = static_cast<int64_t>(weights[d] * n) - static_cast<int64_t>(period * count[d]);
      if (static_cast<int64_t>(K) * lag < static_cast<int64_t>(period)) continue;
      // Falls 1 - 1/K behind at time (K count_d + K - 1) / (K w_d): the earliest such time wins.
      if (best == n_sets ||
          (K * count[d] + K - 1) * weights[best] < (K * count[best] + K - 1) * weights[d])
        best = d;
    }
    TRIDENT_CHECK(best < n_sets, "blend schedule found no dataset behind its share");
    dataset_[n - 1] = static_cast<uint32_t>(best);
    rank_[n - 1] = static_cast<uint32_t>(count[best]++);
  }
}

BlendSlot BlendSchedule::slot(uint64_t sample) const {
  const uint64_t pos = sample % period();
  const uint32_t d = dataset_[pos];
  return BlendSlot{d, sample / period() * weights_[d] + rank_[pos]};
}

}  // namespace trident
