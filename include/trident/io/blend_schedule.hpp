// BlendSchedule: which dataset of a weighted blend global sample i is drawn from, and which of that
// dataset's own samples it is; a pure function of i, O(1) per sample after building one period.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trident {

struct BlendSlot {
  uint32_t dataset;   // index into the blend
  uint64_t index;     // the dataset's own sample number: slots of one dataset count 0, 1, 2, ...
};

class BlendSchedule {
 public:
  // Integer shares, e.g. {3, 7}; the schedule repeats every sum(weights) samples.
  explicit BlendSchedule(const std::vector<uint64_t>& weights);
  uint64_t period() const { return dataset_.size(); }
  size_t datasets() const { return weights_.size(); }
  uint64_t weight(size_t d) const { return weights_[d]; }
  BlendSlot slot(uint64_t sample) const;

 private:
  std::vector<uint64_t> weights_;
  std::vector<uint32_t> dataset_;   // (period) the dataset of each position of a period
  std::vector<uint32_t> rank_;      // (period) earlier positions of the same dataset in the period
};

}  // namespace trident
