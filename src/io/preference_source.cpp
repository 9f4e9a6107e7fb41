// Preference pairs as consecutive samples: the pair permutation is over records, the side is the
// sample's parity, and each side is read like a chat record (masked_sample_row).
#include "trident/io/preference_source.hpp"

#include "trident/core/error.hpp"
#include "trident/io/sft_source.hpp"

namespace trident {

PreferenceSource::PreferenceSource(std::shared_ptr<const MaskedDataset> ds, size_t first, size_t end, int seq_len,
                                   int vocab_size, uint64_t seed)
    : ds_(std::move(ds)), first_(first), end_(end), seq_len_(seq_len), vocab_size_(vocab_size),
      sampler_(record_count(*ds_, first, end), seed) {
  for (size_t r = first_; r < end_; ++r)
    for (int side = 0; side < 2; ++side) cut_ += ds_->sequence_length(r, side) > static_cast<size_t>(seq_len_) + 1;
}

void PreferenceSource::samples(int64_t first, int count, int32_t* out) {
  for (int k = 0; k < count; ++k)
    masked_sample_row(*ds_, record_of(first + k), side_of(first + k), seq_len_, vocab_size_,
                      out + static_cast<size_t>(k) * (seq_len_ + 1));
}

void PreferenceSource::target_mask(int64_t first, int count, uint8_t* out) {
  for (int k = 0; k < count; ++k)
    masked_target_row(*ds_, record_of(first + k), side_of(first + k), seq_len_, vocab_size_,
                      out + static_cast<size_t>(k) * seq_len_);
}

void PreferenceSource::set_reference_nll(std::shared_ptr<const std::vector<float>> by_record) {
  TRIDENT_CHECK(by_record && by_record->size() == 2 * ds_->num_records(),
                "set_reference_nll: not two values per record of the dataset");
  reference_ = std::move(by_record);
}

void PreferenceSource::reference_nll(int64_t first, int count, float* out) {
  TRIDENT_CHECK(reference_ != nullptr, "reference_nll: no reference log-probabilities set");
  for (int k = 0; k < count; ++k) out[k] = (*reference_)[2 * record_of(first + k) + side_of(first + k)];
}

}  // namespace trident
