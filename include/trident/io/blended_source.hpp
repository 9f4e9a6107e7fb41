// BlendedSource: samples drawn from several document ranges in proportion to integer weights; global
// sample i is a pure function of i, so every DP layout and every resume point reads the same data.
#pragma once

#include <vector>

#include "trident/io/blend_schedule.hpp"
#include "trident/io/document_windows.hpp"
#include "trident/train/batch_source.hpp"

namespace trident {

class BlendedSource : public BatchSource {
 public:
  // parts[d] is drawn with weight weights[d]; all parts have the same seq_len.
  BlendedSource(std::vector<DocumentWindows> parts, const std::vector<uint64_t>& weights);
  void samples(int64_t first, int count, int32_t* out) override;
  const std::vector<DocumentWindows>& parts() const { return parts_; }
  const BlendSchedule& schedule() const { return schedule_; }

 private:
  std::vector<DocumentWindows> parts_;
  BlendSchedule schedule_;
};

}  // namespace trident
