// Global sample -> (dataset, that dataset's sample) by the blend schedule -> window by the dataset's sampler.
#include "trident/io/blended_source.hpp"

#include "trident/core/error.hpp"

namespace trident {

BlendedSource::BlendedSource(std::vector<DocumentWindows> parts, const std::vector<uint64_t>& weights)
    : parts_(std::move(parts)), schedule_(weights) {
  TRIDENT_CHECK(!parts_.empty() && parts_.size() == weights.size(),
                str("blend of ", parts_.size(), " parts with ", weights.size(), " weights"));
  for (const DocumentWindows& p : parts_)
    TRIDENT_CHECK(p.seq_len() == parts_[0].seq_len(), "blended parts with different seq_len");
}

void BlendedSource::samples(int64_t first, int count, int32_t* out) {
  TRIDENT_CHECK(first >= 0 && count >= 0, str("samples [", first, ", ", first + count, ")"));
  const size_t len = static_cast<size_t>(parts_[0].seq_len()) + 1;
  for (int k = 0; k < count; ++k) {
    const BlendSlot s = schedule_.slot(static_cast<uint64_t>(first + k));
    parts_[s.dataset].sample(s.index, out + k * len);
  }
}

}  // namespace trident
