// Whole-record samples of a chat dataset: the record's tokens, then padding; its mask shifted by one
// (target t is token t + 1), with padding's targets untrained.
#include "trident/io/sft_source.hpp"

#include <algorithm>

#include "trident/core/error.hpp"

namespace trident {

uint64_t record_count(const MaskedDataset& ds, size_t first, size_t end) {
  TRIDENT_CHECK(first < end && end <= ds.num_records(),
                str(ds.tokens().prefix(), ": records [", first, ", ", end, ") of ", ds.num_records()));
  return end - first;
}

SftSource::SftSource(std::shared_ptr<const MaskedDataset> ds, size_t first, size_t end, int seq_len, int vocab_size,
                     uint64_t seed)
    : ds_(std::move(ds)), first_(first), end_(end), seq_len_(seq_len), vocab_size_(vocab_size),
      sampler_(record_count(*ds_, first, end), seed) {
  for (size_t r = first_; r < end_; ++r) cut_ += ds_->sequence_length(r, 0) > static_cast<size_t>(seq_len_) + 1;
}

void masked_sample_row(const MaskedDataset& ds, size_t record, int which, int seq_len, int vocab_size, int32_t* row) {
  const size_t len = static_cast<size_t>(seq_len) + 1;
  const MaskedTokens r = ds.read(record, which, len);
  std::copy(r.tokens.begin(), r.tokens.end(), row);
  std::fill(row + r.tokens.size(), row + len, 0);
  for (size_t i = 0; i < r.tokens.size(); ++i)
    if (r.tokens[i] < 0 || r.tokens[i] >= vocab_size)
      throw InputError(str(ds.tokens().prefix(), ".bin: token id ", r.tokens[i], " (record ", record,
                           which ? ", rejected side" : "", ", token ", i, ") is outside model.vocab_size = ",
                           vocab_size, "; the data was tokenized for another vocabulary"));
}

void masked_target_row(const MaskedDataset& ds, size_t record, int which, int seq_len, uint8_t* row) {
  const MaskedTokens r = ds.read(record, which, static_cast<size_t>(seq_len) + 1);
  std::fill(row, row + seq_len, 0);
  for (size_t t = 0; t + 1 < r.mask.size(); ++t) row[t] = static_cast<uint8_t>(r.mask[t + 1]);
}

void SftSource::samples(int64_t first, int count, int32_t* out) {
  for (int k = 0; k < count; ++k)
    masked_sample_row(*ds_, record_of(first + k), 0, seq_len_, vocab_size_, out + static_cast<size_t>(k) * (seq_len_ + 1));
}

void SftSource::target_mask(int64_t first, int count, uint8_t* out) {
  for (int k = 0; k < count; ++k) masked_target_row(*ds_, record_of(first + k), 0, seq_len_, out + static_cast<size_t>(k) * seq_len_);
}

}  // namespace trident
